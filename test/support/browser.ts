// What the browser suites share: Debian's Chromium through playwright-core (no browser download),
// launched headless with a fresh profile that is closed and removed whatever happens.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Runs `work` in a fresh headless Chromium profile of `height` pixels (1280 wide). */
export async function withBrowser(work: (browser: BrowserContext) => Promise<void>, height = 1000): Promise<void> {
  const profile = mkdtempSync(join(tmpdir(), 'restable-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  try {
    await work(browser);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
