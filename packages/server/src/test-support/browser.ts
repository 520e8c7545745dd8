// A real browser for the tests that drive a page as a person would: Debian's `chromium` (apt, installed by
// scripts/test.sh; no browser download) under playwright-core, headless. Each launch gets a fresh profile (Playwright
// gives `launch()` a new temporary --user-data-dir), and each context its own cookies.
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Where Debian's chromium package puts the browser. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Flags for a headless browser on a shared test machine: no sandbox (the tests run as root), no GPU, no QUIC, and
 * nothing that calls home (updates, sync, background fetches): every request it makes is one the test caused.
 */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (scripts/test.sh does)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}
