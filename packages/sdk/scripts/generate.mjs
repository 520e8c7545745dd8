#!/usr/bin/env node
// Writes packages/sdk/openapi.json, packages/sdk/src/schema.d.ts and packages/sdk/kinds.json from the BUILT server
// (run `npm run build` first): the document is built in-process, no server listens.
// `--out <dir>` writes the files under <dir> instead (to compare without touching the tree).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderDocument, renderKinds, renderTypes } from './render.mjs';

const sdkDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const serverDist = resolve(sdkDir, '../server/dist');

const { buildOpenApiDocument } = await import(join(serverDist, 'api/openapi.js')).catch((e) => {
  console.error(
    `cannot load the built server from ${serverDist}; run \`npm run build\` first (${e.message})`,
  );
  process.exit(1);
});
const { KINDS } = await import(join(serverDist, 'kinds/index.js'));

const i = process.argv.indexOf('--out');
const outDir = i > 0 ? resolve(process.argv[i + 1]) : sdkDir;
const doc = buildOpenApiDocument(KINDS);
const docPath = join(outDir, 'openapi.json');
const typesPath = join(outDir, 'src/schema.d.ts');
const kindsPath = join(outDir, 'kinds.json');
mkdirSync(dirname(typesPath), { recursive: true });
writeFileSync(docPath, renderDocument(doc));
writeFileSync(typesPath, await renderTypes(doc));
writeFileSync(kindsPath, renderKinds(KINDS));
console.log(
  `wrote ${docPath}, ${typesPath} and ${kindsPath} (${KINDS.length} kinds, ${Object.keys(doc.paths).length} paths)`,
);
