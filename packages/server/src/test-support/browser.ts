// A real browser for tests: Debian's chromium driven by playwright-core (nothing is downloaded at install). One
// place for the launch options every browser test shares: headless, no sandbox (tests run as root), and no
// background traffic of Chromium's own (updates, sync, QUIC probes), which this closed network refuses and which
// would slow or stall the page. Playwright gives each launch a fresh profile of its own (a temporary
// --user-data-dir), removed on close.
import { existsSync } from 'node:fs';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';

/** Debian's chromium (TEST_DEBS in scripts/test.sh); BERTH_TEST_CHROMIUM names another binary. */
export const CHROMIUM = process.env.BERTH_TEST_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

export interface TestBrowser {
  browser: Browser;
  /** A fresh context (its own storage: a new tab session), at this viewport. */
  context(opts?: {
    width?: number;
    height?: number;
    colorScheme?: 'light' | 'dark';
  }): Promise<BrowserContext>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: apt-get install chromium (scripts/test.sh installs it as root)`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  return {
    browser,
    context: (o = {}) =>
      browser.newContext({
        viewport: { width: o.width ?? 1360, height: o.height ?? 860 },
        colorScheme: o.colorScheme ?? 'light',
        // Terminal copy/paste reads and writes the clipboard.
        permissions: ['clipboard-read', 'clipboard-write'],
      }),
    async close() {
      await browser.close().catch(() => undefined);
    },
  };
}
