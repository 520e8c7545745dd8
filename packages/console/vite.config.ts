// The console is served by `berth serve` at /console (packages/server/src/api/console.ts) from dist/: hashed
// file names under assets/ (cached for a year), no inline script or style (the page's CSP allows none).
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 400,
    reportCompressedSize: true,
  },
  server: {
    proxy: { '/v0': 'http://127.0.0.1:8080', '/run': { target: 'http://127.0.0.1:8080', ws: true } },
  },
});
