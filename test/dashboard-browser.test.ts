/**
 * The dashboard in a real browser: Debian's chromium, headless, driven by playwright-core with the
 * system executable. A process serving its dashboard (test/support/dashboard-child.ts): the page loads
 * with no console error and no failed request, its first values are drawn from the data embedded in
 * it (not from its stream), its values move within 2 s, and its stream comes back by itself when the
 * server restarts. Its controls write to a MemoryRuleStore a Rules binder follows: a refused limit or
 * fault value shows bulwark/rules' message beside its field and writes nothing; isolate holds the
 * breaker open; the Rules card shows what each component runs and refused. The fleet: `bulwark
 * dashboard --rules etcd://… --controls` over a real etcd shows three processes, isolates one's
 * breaker through the rules in etcd, and shows one that dies as unreachable, then gone.
 * The demo (`bulwark demo`, what `npm start` runs): its "kill" button ejects an instance and opens its
 * breaker on the page within 5 s, and "restore" brings it back.
 * Screenshots at 1280×800 and 390×844 go to BULWARK_TEST_ARTIFACTS (default .tmp/artifacts/dashboard).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { canConnect, findBinary, freePort, ServerProcess, skipReason, waitFor } from './support/servers.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { tsNodeArgs } from './support/ts-node.js';
import { bulwarkArgs } from './serve-harness.js';

/** The page's document, in the functions run in the browser (the tests are type-checked without the DOM's types). */
interface PageNode {
  readonly textContent: string | null;
}
declare const document: { getElementById(id: string): PageNode | null; querySelectorAll(selector: string): Iterable<PageNode> };

const root = fileURLToPath(new URL('..', import.meta.url));
const CHILD = fileURLToPath(new URL('./support/dashboard-child.ts', import.meta.url));
const chromiumBinary = findBinary('chromium');
const shots = process.env.BULWARK_TEST_ARTIFACTS ?? join(root, '.tmp', 'artifacts', 'dashboard');

/** startChild starts a process serving its dashboard on `port` (registered in etcd when given). */
async function startChild(port: number, etcd?: { endpoint: string; prefix: string; service: string; id: string } | 'controls'): Promise<ServerProcess> {
  const extra = etcd === undefined ? [] : etcd === 'controls' ? ['controls'] : [etcd.endpoint, etcd.prefix, etcd.service, etcd.id];
  const p = new ServerProcess(`dashboard child ${port}`, process.execPath, tsNodeArgs(CHILD, String(port), ...extra), root);
  // A child loads much of the library: under a loaded machine its start takes tens of seconds.
  await p.start(() => canConnect(port), 90_000);
  return p;
}

/** watchPage collects the page's console errors, uncaught errors and failed requests. */
function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText ?? ''}`));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`response ${r.status()}: ${r.url()}`);
  });
  return problems;
}

const text = (page: Page, selector: string) => page.locator(selector).first().innerText();

/**
 * wholePage saves the whole page from its top. Chromium's full-page capture draws the sticky header where the
 * page was scrolled to, over whatever lies there (a page scrolled by a click looked as if the header covered a
 * chart): a capture of the page at its top shows the page as it is laid out.
 */
async function wholePage(page: Page, name: string): Promise<void> {
  await page.evaluate('window.scrollTo(0, 0)');
  await page.screenshot({ path: join(shots, name), fullPage: true });
}

describe('dashboard in chromium', { skip: skipReason(chromiumBinary, 'chromium'), concurrency: 1 }, () => {
  let browser: Browser;
  before(async () => {
    mkdirSync(shots, { recursive: true });
    browser = await chromium.launch({ executablePath: chromiumBinary!, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  });
  after(async () => {
    await browser?.close();
  });

  describe('one process', () => {
    let port: number;
    let child: ServerProcess;
    before(async () => {
      port = await freePort();
      child = await startChild(port);
    });
    after(async () => {
      await child?.kill();
    });

    it('loads with no console error and no failed request, first values drawn from the data in the page, values moving within 2 s', async () => {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      const problems = watchPage(page);
      let pageBytes = 0;
      page.on('response', (r) => {
        if (r.url().endsWith('/dashboard/')) void r.body().then((b) => (pageBytes = b.length));
      });
      await page.goto(`http://127.0.0.1:${port}/dashboard/`);
      await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live', undefined, { timeout: 10_000 });
      // From the navigation's start, as the page marks its steps and the browser its first paint.
      const t = await page.evaluate(() => {
        const at = (name: string) => performance.getEntriesByName(name)[0]?.startTime ?? -1;
        return {
          embedded: at('bulwark-embedded-data'),
          firstData: at('bulwark-first-data'),
          firstTick: at('bulwark-first-tick'),
          fcp: at('first-contentful-paint'),
        };
      });
      console.log(
        `# dashboard: page ${pageBytes} bytes, first values in the document ${t.firstData.toFixed(0)} ms after navigation (first paint ${t.fcp.toFixed(0)} ms, the stream's first frame ${t.firstTick.toFixed(0)} ms)`,
      );
      assert.ok(pageBytes > 0 && pageBytes <= 300 * 1024, `page weighs ${pageBytes} bytes`);
      // The first values come from the data embedded in the page, not from the stream's first frame.
      assert.ok(t.embedded >= 0 && t.embedded <= t.firstData, `the first values were not drawn from the embedded data: ${JSON.stringify(t)}`);
      // The goal is 1 s (docs/dashboard.md has the measured numbers: p50 ≈ 0.2 s under a load average of 10 on 2
      // cores, where the page that waited for its stream took up to 1.7 s); this bound holds on such a machine.
      assert.ok(t.firstData <= 1_500, `first data after ${t.firstData} ms`);
      // Values under their column's name (the unit: "admitted"), moving: the limiter's admitted count is read
      // twice, 2 s apart at most.
      assert.equal(await page.locator('.card:has(h2:text-is("Limiters")) th').nth(3).innerText(), 'admitted');
      const admitted = () => page.locator('td[data-h="admitted"]').first().innerText();
      const before = await admitted();
      assert.match(before, /^[\d,]+$/);
      await page.waitForFunction((b) => [...document.querySelectorAll('td[data-h="admitted"]')].some((td) => td.textContent !== b), before, { timeout: 2_000 });
      assert.match(await text(page, '#l-calls'), /calls\/s/);
      assert.match(await page.locator('.card:has(h2:text-is("Breakers"))').innerText(), /closed/);
      assert.match(await page.locator('.card:has(h2:text-is("Cache"))').innerText(), /\d+(\.\d)? %/);
      await page.waitForTimeout(2_500); // a few more points on the charts for the screenshot
      await page.screenshot({ path: join(shots, 'process-1280x800.png') });
      await page.setViewportSize({ width: 390, height: 844 });
      await wholePage(page, 'process-390x844.png');
      assert.deepEqual(problems, []);
      await page.close();
    });

    it('keeps the stream across a server restart: the page follows the new process by itself', async () => {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      await page.goto(`http://127.0.0.1:${port}/dashboard/`);
      await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live', undefined, { timeout: 10_000 });
      const first = await text(page, '#title');
      assert.match(first, new RegExp(`pid ${child.pid}`));
      await child.kill();
      await page.waitForFunction(() => document.getElementById('conn')?.textContent !== 'live', undefined, { timeout: 10_000 });
      assert.match(await text(page, '#conn'), /reconnecting|stalled/);
      child = await startChild(port);
      await page.waitForFunction(
        (pid) => document.getElementById('title')?.textContent?.includes(`pid ${pid}`) === true && document.getElementById('conn')?.textContent === 'live',
        child.pid,
        { timeout: 15_000 },
      );
      await page.close();
    });
  });

  describe('controls', () => {
    let child: ServerProcess;
    let port: number;
    before(async () => {
      port = await freePort();
      child = await startChild(port, 'controls');
    });
    after(async () => {
      await child?.kill();
    });

    it('an invalid limit shows the validation message beside the field and writes no rule; a valid one is written', async () => {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      const problems = watchPage(page);
      await page.goto(`http://127.0.0.1:${port}/dashboard/`);
      const field = page.locator('input[aria-label="new rate, calls/s"]');
      await field.waitFor({ timeout: 10_000 });
      await field.fill('-5');
      await page.locator('button:text-is("set limit")').click();
      const note = page.locator('[data-note="checkout|token-limiter|api-limit|rate"]');
      await waitFor('the validation message', async () => /rate must be a finite number > 0, got -5/.test(await note.innerText()), 5_000);
      // bulwark/rules' message, as `bulwark rules set` gives it
      assert.equal(await note.innerText(), 'TokenLimiter: rate must be a finite number > 0, got -5');
      // beside the field: the same cell
      assert.equal(await page.locator('td:has(input[aria-label="new rate, calls/s"]) [data-note]').count(), 1);
      await page.screenshot({ path: join(shots, 'controls-refused-1280x800.png') });
      assert.doesNotMatch(child.logs, /rule put/);
      await page.locator('input[aria-label="new rate, calls/s"]').fill('12');
      await page.locator('button:text-is("set limit")').click();
      await waitFor(
        'the rule written',
        () =>
          /rule put checkout\/token-limiter\/api-limit \{"scope":"checkout","kind":"token-limiter","name":"api-limit","set":\{"rate":12\}\}/.test(child.logs),
        5_000,
      );
      await waitFor('the page to say so', async () => /written: checkout\/token-limiter\/api-limit/.test(await note.innerText()), 5_000);
      // a 422 is a response ≥ 400 on purpose: the only one
      assert.deepEqual(
        problems.filter((p) => !/response 422: .*\/controls\/put$/.test(p) && !/status of 422/.test(p)),
        [],
      );
      await page.close();
    });

    it('a fault rehearsal from its fields: a refused value beside its field, nothing written; a good one on a lease', async () => {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      await page.goto(`http://127.0.0.1:${port}/dashboard/`);
      const input = (label: string) => page.locator(`input[aria-label="${label}"]`);
      await input('of calls failed, %').waitFor({ timeout: 10_000 });
      await input('service or route').fill('payments');
      await input('of calls failed, %').fill('140');
      await page.locator('button:text-is("start rehearsal")').click();
      const note = page.locator('[data-note="checkout|fault||fault.abort.percent"]');
      await waitFor('the message beside the field', async () => /abort\.percent must be/.test(await note.innerText()), 5_000);
      assert.match(await note.innerText(), /^FaultInjector: abort\.percent must be a finite number in \[0, 100\], got 140$/);
      assert.doesNotMatch(child.logs, /rule put checkout\/fault/);
      await input('of calls failed, %').fill('20');
      await input('delay, ms').fill('150');
      await input('of calls delayed, %').fill('50');
      await input('rehearsal length, s').fill('120');
      await page.locator('button:text-is("start rehearsal")').click();
      await waitFor(
        'the fault rule written',
        () =>
          /rule put checkout\/fault\/payments \{"scope":"checkout","kind":"fault","name":"payments","fault":\{"delay":\{"ms":150,"percent":50\},"abort":\{"percent":20,"status":503\}\},"ttlMs":120000\}/.test(
            child.logs,
          ),
        5_000,
      );
      await page.screenshot({ path: join(shots, 'controls-fault-1280x800.png') });
      await page.setViewportSize({ width: 390, height: 844 });
      // Scrolled on a phone, the header stays at the top of the view, above the page (the view as a user sees it).
      await page.evaluate('window.scrollTo(0, 900)');
      assert.ok(((await page.evaluate('window.scrollY')) as number) > 0, 'the page did not scroll');
      assert.equal((await page.locator('header').boundingBox())?.y, 0); // relative to the view
      await page.screenshot({ path: join(shots, 'controls-390x844-scrolled.png') });
      await wholePage(page, 'controls-390x844.png');
      await page.close();
    });

    it('isolate from the page: the binder holds the breaker open, and the Rules card shows what it runs and what it refused', async () => {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      const problems = watchPage(page);
      await page.goto(`http://127.0.0.1:${port}/dashboard/`);
      const breakers = page.locator('.card:has(h2:text-is("Breakers"))');
      const origin = breakers.locator('tr:has(td:text-is("origin"))');
      await origin.locator('button:text-is("isolate")').click({ timeout: 10_000 });
      await waitFor('the breaker isolated by the rule', async () => /isolated by a rule/.test(await origin.innerText()), 5_000);
      const rulesCard = page.locator('.card:has(h2:text-is("Rules: rules"))');
      await waitFor('the Rules card lists the rule', async () => /checkout\/isolate\/origin/.test(await rulesCard.innerText()), 5_000);
      // A rule the component refuses: valid offline, but a running breaker's name cannot change.
      const r = await page.evaluate(
        async () =>
          (
            await fetch('controls/put', {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ scope: 'checkout', kind: 'circuit-breaker', name: 'origin', set: { name: 'renamed' } }),
            })
          ).status,
      );
      assert.equal(r, 200);
      await waitFor('the refusal on the page', async () => /refused checkout\/circuit-breaker\/origin/.test(await rulesCard.innerText()), 5_000);
      assert.match(await rulesCard.innerText(), /refused by the component/);
      await wholePage(page, 'controls-rules-1280x800.png');
      await origin.locator('button:text-is("release")').click();
      await waitFor('the breaker released', async () => !/isolated by a rule/.test(await origin.innerText()), 5_000);
      assert.deepEqual(problems, []);
      await page.close();
    });
  });

  describe('the fleet', { skip: skipReason(etcdBinary, 'etcd') }, () => {
    let etcd: EtcdServer;
    const children: ServerProcess[] = [];
    let dashboard: ChildProcess | undefined;
    const prefix = `/dashboard-test-${process.pid}`;
    before(async () => {
      etcd = await startEtcd();
    });
    after(async () => {
      dashboard?.kill('SIGKILL');
      for (const c of children) await c.kill();
      await etcd?.stop();
    });

    it('shows three processes of a service, and one that dies as unreachable, then gone', async () => {
      for (const id of ['a', 'b', 'c']) children.push(await startChild(await freePort(), { endpoint: etcd.endpoint, prefix, service: 'orders', id }));
      const port = await freePort();
      dashboard = spawn(
        process.execPath,
        bulwarkArgs([
          'dashboard',
          '--registry',
          etcd.endpoint.replace('http://', 'etcd://'),
          '--etcd-prefix',
          prefix,
          '--rules',
          etcd.endpoint.replace('http://', 'etcd://'),
          '--rules-prefix',
          `${prefix}/rules/`,
          '--controls',
          '--listen',
          `127.0.0.1:${port}`,
          '--tick',
          '500ms',
          '--refresh',
          '500ms',
        ]),
        { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      dashboard.stdout!.on('data', (b: Buffer) => (out += b.toString()));
      dashboard.stderr!.on('data', (b: Buffer) => (out += b.toString()));
      await waitFor('bulwark dashboard to listen', () => /bulwark dashboard: http:\/\//.test(out), 30_000);
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      const problems = watchPage(page);
      await page.goto(`http://127.0.0.1:${port}/`);
      const rowState = (id: string) => page.locator(`tr.inst[data-key="orders/${id}"] td:nth-child(3)`).innerText();
      await waitFor(
        'three instances up on the page',
        async () => (await page.locator('tr.inst').count()) === 3 && (await Promise.all(['a', 'b', 'c'].map(rowState))).every((s) => s.startsWith('up')),
        60_000,
      );
      assert.match(await page.locator('#body .card h2').first().innerText(), /orders — 3 of 3 instances up/);
      assert.match(await page.locator('tr.inst[data-key="orders/a"]').innerText(), /calls\/s/);
      // an instance's own components open beside it
      await page.locator('tr.inst[data-key="orders/a"]').click();
      await page.waitForSelector('tr.detail .card h2:text-is("Breakers")', { timeout: 5_000 });
      // the controls write for the instance shown, to the rules store its binder follows
      const origin = page.locator('tr.detail .card:has(h2:text-is("Breakers")) tr:has(td:text-is("origin"))');
      await origin.locator('button:text-is("isolate")').click({ timeout: 5_000 });
      await waitFor("a's breaker isolated by the rule", async () => /isolated by a rule/.test(await origin.innerText()), 10_000);
      assert.match(await page.locator('tr.detail .card:has(h2:text-is("Rules: rules"))').innerText(), /orders@a\/isolate\/origin/);
      await page.screenshot({ path: join(shots, 'fleet-1280x800.png') });
      await page.setViewportSize({ width: 390, height: 844 });
      await wholePage(page, 'fleet-390x844.png');
      await page.setViewportSize({ width: 1280, height: 800 });
      assert.deepEqual(problems, []);
      // b dies: its stream fails at once (unreachable), its lease (2 s) expires and it leaves the registry (gone)
      await children[1]!.kill();
      await waitFor('b unreachable', async () => /^(unreachable|gone)/.test(await rowState('b')), 5_000);
      await waitFor('b gone', async () => /^gone/.test(await rowState('b')), 15_000);
      assert.match(await page.locator('#body .card h2').first().innerText(), /orders — 2 of 3 instances up/);
      assert.match(await rowState('a'), /^up/);
      await page.locator('tr.inst[data-key="orders/a"]').click(); // folded again: the three rows in view
      await page.waitForSelector('tr.detail', { state: 'detached', timeout: 5_000 });
      await page.screenshot({ path: join(shots, 'fleet-one-gone-1280x800.png') });
      await page.close();
    });
  });

  describe('the demo (npm start)', () => {
    let demo: ChildProcess | undefined;
    let out = '';
    after(() => {
      demo?.kill('SIGKILL');
    });

    it('shows demo controls apart from rule controls; "kill" ejects the instance and opens its breaker within 5 s, "restore" brings it back', async () => {
      // No terminal: a long --duration so that the run's own registry outage (half-way) stays out of the test.
      demo = spawn(process.execPath, bulwarkArgs(['demo', '--duration', '20m', '--port', '0', '--rate', '60']), {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      demo.stdout!.on('data', (b: Buffer) => (out += b.toString()));
      demo.stderr!.on('data', (b: Buffer) => (out += b.toString()));
      await waitFor('the demo to print its dashboard URL', () => /^dashboard: http:\/\/127\.0\.0\.1:\d+\//.test(out), 60_000);
      assert.match(out.split('\n')[0]!, /^dashboard: http:\/\/127\.0\.0\.1:\d+\//, 'the URL is not the first line');
      const url = /^dashboard: (http:\/\/\S+)/.exec(out)![1]!;
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      const problems = watchPage(page);
      await page.goto(url);
      await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live', undefined, { timeout: 15_000 });
      const controls = page.locator('#actions');
      await controls.locator('button:text-is("kill")').first().waitFor({ timeout: 10_000 });
      assert.match(await controls.locator('h2').innerText(), /^Demo controls — act on this process directly; not rules/);
      // The rule controls are there too, under their own words.
      await page.locator('button:text-is("isolate")').first().waitFor({ timeout: 10_000 });
      const healthyRow = controls.locator('tr', { hasText: 'payments › healthy' });
      const address = /\((127\.0\.0\.1:\d+)\)/.exec(await healthyRow.innerText())![1]!;
      const balancerRow = page.locator('tr', { hasText: `↳ ${address}` });
      const breakerRow = page.locator('tr', { hasText: 'instance breakers › payments/healthy' });
      await waitFor(
        'the healthy instance up with its breaker closed',
        async () => /\bup\b/.test(await balancerRow.innerText()) && /closed/.test(await breakerRow.innerText()),
        30_000,
      );
      await page.screenshot({ path: join(shots, 'demo-1280x800.png') });
      await page.setViewportSize({ width: 390, height: 844 });
      await wholePage(page, 'demo-390x844.png');
      await page.setViewportSize({ width: 1280, height: 800 });

      await healthyRow.locator('button:text-is("kill")').click();
      const killedAt = Date.now();
      // Outlier detection ejects it first (5 failures in a row); its breaker trips on the calls that reach
      // it once the ejection ends (2 s). Each must show on the page within 5 s of the click.
      const seen: { ejected?: number; open?: number } = {};
      await waitFor(
        'the instance ejected and its breaker open on the page',
        async () => {
          if (seen.ejected === undefined && /ejected/.test(await balancerRow.innerText())) seen.ejected = Date.now() - killedAt;
          if (seen.open === undefined && /open: tripped/.test(await breakerRow.innerText())) seen.open = Date.now() - killedAt;
          return seen.ejected !== undefined && seen.open !== undefined;
        },
        5_000,
      ).catch(async (err: Error) => {
        throw new Error(
          `${err.message}: seen ${JSON.stringify(seen)}; balancer row "${await balancerRow.innerText()}", breaker row "${await breakerRow.innerText()}", demo controls "${await controls.innerText()}", demo's last lines: ${out.split('\n').slice(-3).join('\n')}`,
        );
      });
      console.log(`# demo: kill shown as ejected after ${seen.ejected} ms, breaker open after ${seen.open} ms`);
      assert.match(await healthyRow.innerText(), /killed/);
      assert.match(await page.locator('#action-note').innerText(), /payments › healthy killed/);
      await wholePage(page, 'demo-killed-1280x800.png');

      await healthyRow.locator('button:text-is("restore")').click();
      // Back in rotation once its ejection ends and its breaker closed once its probes pass (after 5 s open).
      await waitFor(
        'the instance back: up and its breaker closed',
        async () =>
          /\bup\b/.test(await balancerRow.innerText()) && !/ejected/.test(await balancerRow.innerText()) && /closed/.test(await breakerRow.innerText()),
        30_000,
      );
      assert.match(await healthyRow.innerText(), /\bup\b/);

      // The Registry card: "up" while the registry answers; "stale" once it is down (the cache answers what it
      // last had), with how long; "up" again once it is back.
      const registryStates = async () => (await page.locator('.card:has(h2:text-is("Registry")) td[data-h="state"]').allInnerTexts()).map((t) => t.trim());
      await waitFor('the registry up on the page', async () => (await registryStates()).join() === 'up,up,up', 5_000);
      const registryRow = controls.locator('tr[data-target="registry"]');
      await registryRow.locator('button:text-is("take down")').click();
      await waitFor('the registry shown stale', async () => (await registryStates()).includes('stale'), 10_000);
      assert.match(await page.locator('.card:has(h2:text-is("Registry"))').innerText(), /stale[\s\S]*\d+ m?s/);
      await wholePage(page, 'demo-registry-down-1280x800.png');
      await page.setViewportSize({ width: 390, height: 844 });
      await wholePage(page, 'demo-registry-down-390x844.png');
      await page.setViewportSize({ width: 1280, height: 800 });
      await registryRow.locator('button:text-is("bring back")').click();
      await waitFor('the registry up again', async () => (await registryStates()).join() === 'up,up,up', 10_000);
      assert.deepEqual(problems, []);
      await page.close();
    });
  });
});
