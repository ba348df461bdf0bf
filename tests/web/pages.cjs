// Drives Debian's chromium through playwright-core for tests/git/web_pages.rs: opens each
// page, runs axe-core on it, counts what a hostile README could make the browser do (script
// elements, dialogs), takes screenshots, walks a page with the keyboard, and signs in and
// out through the form. Reads its plan as JSON from argv[2]; prints the findings as JSON on
// stdout for the Rust test to assert on (this script decides nothing itself).
'use strict';
const fs = require('fs');
const { chromium } = require('playwright-core');
const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function audit(page) {
  // Evaluated over the DevTools protocol: the page's own CSP (no script) does not apply.
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    // A README is its author's markup (an image without alt text, say): the pages are
    // checked, what users wrote inside them is not.
    const context = { exclude: [['.markdown']] };
    const r = await window.axe.run(context, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
  return result;
}

// Elements with an event handler attribute; elements whose link or source is a
// `javascript:` URL.
const HANDLERS = () => [...document.querySelectorAll('*')]
  .filter((e) => [...e.attributes].some((a) => a.name.startsWith('on'))).length;
const JS_URLS = () => [...document.querySelectorAll('[href], [src], [action], [data], [formaction]')]
  .filter((e) => ['href', 'src', 'action', 'data', 'formaction']
    .some((n) => (e.getAttribute(n) || '').trim().toLowerCase().startsWith('javascript:'))).length;

// Whether an inline script added to the page now runs (it calls the handler with 'control').
async function inlineScriptRuns(page, calls) {
  const before = calls.filter((c) => c.what === 'control').length;
  await page.evaluate(() => {
    const s = document.createElement('script');
    s.textContent = "gitXetCanary('control')";
    document.body.append(s);
  });
  await page.waitForTimeout(200);
  return calls.filter((c) => c.what === 'control').length > before;
}

// The README's pages once more with the Content-Security-Policy switched off, so that only
// the sanitizer stands between the README and the page: its elements hovered and focused,
// and then an inline script added, to prove that a script would have run here.
async function withoutCsp(browser, plan, canaryCalls) {
  const context = await browser.newContext({ bypassCSP: true, viewport: { width: 1100, height: 900 } });
  await context.exposeBinding('gitXetCanary', (_, what) => { canaryCalls.push({ what, csp: false }); });
  // Requests anywhere but this server are recorded and stopped here (the policy that
  // would stop them is off).
  const elsewhere = [];
  await context.route('**/*', (route) => {
    const request = route.request();
    if (request.url().startsWith(plan.base)) { return route.continue(); }
    elsewhere.push({ url: request.url(), type: request.resourceType() });
    return route.abort();
  });
  const page = await context.newPage();
  const found = [];
  try {
    for (const path of plan.without_csp) {
      await page.goto(plan.base + path, { waitUntil: 'load' });
      await page.waitForTimeout(300);
      const readme = page.locator('.markdown');
      const present = (await readme.count()) > 0;
      if (present) {
        const box = await readme.first().boundingBox();
        for (let y = box.y; y < box.y + box.height; y += 10) {
          await page.mouse.move(box.x + 5, y);
        }
        for (const e of await page.locator('.markdown a, .markdown input, .markdown details').all()) {
          await e.focus().catch(() => {});
        }
      }
      found.push({ path, readme: present, scripts: await page.evaluate(() => document.querySelectorAll('script').length),
        handlers: await page.evaluate(HANDLERS), js_urls: await page.evaluate(JS_URLS),
        inline_script_runs: await inlineScriptRuns(page, canaryCalls) });
    }
  } finally {
    await context.close();
  }
  return { pages: found, elsewhere };
}

async function main() {
  const browser = await chromium.launch({ executablePath: plan.chromium, args: ARGS });
  const out = { pages: [], keyboard: null, session: null };
  const canaryCalls = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    await context.exposeBinding('gitXetCanary', (_, what) => { canaryCalls.push({ what, csp: true }); });
    const page = await context.newPage();
    let dialogs = 0;
    page.on('dialog', async (d) => { dialogs += 1; await d.dismiss(); });
    const consoleErrors = [];
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    for (const p of plan.pages) {
      const response = await page.goto(plan.base + p.path, { waitUntil: 'load' });
      await page.waitForTimeout(300); // anything a script or an image would still start
      const found = {
        name: p.name,
        status: response.status(),
        csp: response.headers()['content-security-policy'] || null,
        title: await page.title(),
        scripts: await page.evaluate(() => document.querySelectorAll('script').length),
        handlers: await page.evaluate(HANDLERS),
        js_urls: await page.evaluate(JS_URLS),
        text: await page.evaluate(() => document.body.innerText),
        violations: await audit(page),
      };
      if (p.shot && plan.shots) {
        await page.screenshot({ path: `${plan.shots}/${p.shot}`, fullPage: p.full_page === true });
      }
      out.pages.push(found);
    }
    out.dialogs = dialogs;
    out.inline_script_runs_with_csp = await inlineScriptRuns(page, canaryCalls);
    out.console_errors = consoleErrors;

    // Keyboard: the first Tab reaches the skip link, Enter moves focus into the content,
    // and Tabs from there reach the target link, which Enter follows.
    const k = plan.keyboard;
    await page.goto(plan.base + k.start, { waitUntil: 'load' });
    await page.keyboard.press('Tab');
    const first = await page.evaluate(() => document.activeElement.textContent.trim());
    await page.keyboard.press('Enter');
    const afterSkip = await page.evaluate(() => document.activeElement.id);
    let tabs = 0;
    let reached = false;
    const focusRings = [];
    while (tabs < 60 && !reached) {
      await page.keyboard.press('Tab');
      tabs += 1;
      const f = await page.evaluate(() => {
        const e = document.activeElement;
        const style = getComputedStyle(e);
        return { text: e.textContent.trim(), outline: style.outlineStyle + ' ' + style.outlineWidth };
      });
      focusRings.push(f.outline);
      reached = f.text === k.target_text;
    }
    if (reached) {
      await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.keyboard.press('Enter')]);
    }
    out.keyboard = { first, after_skip: afterSkip, tabs, reached, url: page.url(),
      focus_rings: focusRings };

    // Sign in with the form (typed and submitted from the keyboard), read a private page,
    // look at the cookie, sign out.
    const s = plan.session;
    const before = await page.goto(plan.base + s.private_path, { waitUntil: 'load' });
    await page.goto(plan.base + '/-/sign-in?next=' + encodeURIComponent(s.private_path));
    await page.focus('#token');
    await page.keyboard.type(s.token);
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.keyboard.press('Enter')]);
    const signedIn = { url: page.url(), text: await page.evaluate(() => document.body.innerText),
      script_cookie: await page.evaluate(() => document.cookie),
      violations: await audit(page) };
    const cookies = (await context.cookies()).map((c) => ({ name: c.name, httpOnly: c.httpOnly,
      secure: c.secure, sameSite: c.sameSite, path: c.path }));
    if (plan.shots && s.shot) { await page.screenshot({ path: `${plan.shots}/${s.shot}` }); }
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }),
      page.click('form[action="/-/sign-out"] button')]);
    const after = await page.goto(plan.base + s.private_path, { waitUntil: 'load' });
    out.session = { before_status: before.status(), signed_in: signedIn, cookies,
      after_status: after.status(), cookies_after: (await context.cookies()).length };
    await context.close();
    out.without_csp = await withoutCsp(browser, plan, canaryCalls);
    out.canary_calls = canaryCalls;
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
