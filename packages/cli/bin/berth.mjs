#!/usr/bin/env node
import { main } from '../dist/main.js';

main(process.argv).catch((e) => {
  console.error(`berth: ${e?.message ?? e}`);
  process.exit(1);
});
