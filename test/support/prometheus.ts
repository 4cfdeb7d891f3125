/**
 * Starts a real Prometheus server (Debian `prometheus`) on a free loopback port, with a temporary data
 * dir and a config that scrapes the given targets every second; stopped by PID. `query()` asks its HTTP
 * API (instant query); `waitForQuery()` polls a query until a condition holds or a deadline passes.
 * `promtoolBinary` / `checkMetrics()` run `promtool check metrics` on an exposition; `promtool()` runs any
 * promtool command (`check rules`, `test rules`).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { canConnect, findBinary, freePort, ServerProcess, tempDir, waitFor } from './servers.js';

/** prometheusBinary is the prometheus path, or undefined when it is not installed (see servers.ts). */
export const prometheusBinary = findBinary('prometheus');
/** promtoolBinary is the promtool path, or undefined when it is not installed. */
export const promtoolBinary = findBinary('promtool');

/** PromSample is one series of an instant query's answer. */
export interface PromSample {
  metric: Record<string, string>;
  value: number;
}

/** PromRule is one rule as Prometheus's rules API reports it. */
export interface PromRule {
  name: string;
  type: string;
  query: string;
  /** 'ok' once evaluated without error, 'err' after an error, 'unknown' before the first evaluation. */
  health: string;
  lastError?: string;
  /** The alert's `for:` in seconds. */
  duration?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** An alerting rule's active alerts: their labels and state ('pending' until `for:` has passed, then 'firing'). */
  alerts?: { labels: Record<string, string>; state: string }[];
}

/** PrometheusServer is a running Prometheus a test owns. */
export interface PrometheusServer {
  readonly port: number;
  readonly url: string;
  readonly process: ServerProcess;
  /** query runs an instant PromQL query. */
  query(promql: string): Promise<PromSample[]>;
  /** waitForQuery polls `promql` until `ok(samples)` holds; throws after `timeoutMs` with the last answer. */
  waitForQuery(promql: string, ok: (s: PromSample[]) => boolean, timeoutMs?: number): Promise<PromSample[]>;
  /** targets answers the scrape targets' health ('up', 'down', 'unknown') and last error. */
  targets(): Promise<{ health: string; lastError: string; scrapeUrl: string }[]>;
  /** rules answers the loaded rules (`ruleFiles`) with their query and their last evaluation's health and error. */
  rules(): Promise<PromRule[]>;
  stop(): Promise<void>;
}

/**
 * startPrometheus starts Prometheus scraping `targets` (host:port, path /metrics) every second, and
 * evaluating the rules of `ruleFiles` (absolute paths) every second.
 */
export async function startPrometheus(targets: string[], options?: { metricsPath?: string; ruleFiles?: string[] }): Promise<PrometheusServer> {
  if (prometheusBinary === undefined) throw new Error('prometheus is not installed');
  const dir = tempDir('prometheus');
  const port = await freePort();
  const config = [
    'global:',
    '  scrape_interval: 1s',
    '  scrape_timeout: 1s',
    '  evaluation_interval: 1s',
    ...(options?.ruleFiles === undefined ? [] : ['rule_files:', ...options.ruleFiles.map((f) => `  - ${JSON.stringify(f)}`)]),
    'scrape_configs:',
    '  - job_name: bulwark',
    `    metrics_path: ${options?.metricsPath ?? '/metrics'}`,
    '    static_configs:',
    `      - targets: [${targets.map((t) => JSON.stringify(t)).join(', ')}]`,
    '',
  ].join('\n');
  const configPath = join(dir.path, 'prometheus.yml');
  writeFileSync(configPath, config);
  const args = [`--config.file=${configPath}`, `--storage.tsdb.path=${join(dir.path, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'];
  const proc = new ServerProcess('prometheus', prometheusBinary, args, dir.path);
  const url = `http://127.0.0.1:${port}`;
  await proc.start(async () => {
    if (!(await canConnect(port))) return false;
    try {
      const r = await fetch(`${url}/-/ready`);
      return r.status === 200;
    } catch {
      return false;
    }
  }, 30_000);
  const query = async (promql: string): Promise<PromSample[]> => {
    const r = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await r.json()) as { status: string; error?: string; data?: { result: { metric: Record<string, string>; value: [number, string] }[] } };
    if (body.status !== 'success') throw new Error(`prometheus query ${promql} failed: ${body.error ?? r.status}`);
    return body.data!.result.map((x) => ({ metric: x.metric, value: Number(x.value[1]) }));
  };
  return {
    port,
    url,
    process: proc,
    query,
    async waitForQuery(promql, ok, timeoutMs = 15_000) {
      let last: PromSample[] = [];
      try {
        await waitFor(`prometheus: ${promql}`, async () => ok((last = await query(promql))), timeoutMs);
      } catch (err) {
        throw new Error(`${(err as Error).message}; last answer: ${JSON.stringify(last)}`);
      }
      return last;
    },
    async targets() {
      const r = await fetch(`${url}/api/v1/targets`);
      const body = (await r.json()) as { data: { activeTargets: { health: string; lastError: string; scrapeUrl: string }[] } };
      return body.data.activeTargets;
    },
    async rules() {
      const r = await fetch(`${url}/api/v1/rules`);
      const body = (await r.json()) as { data: { groups: { rules: PromRule[] }[] } };
      return body.data.groups.flatMap((g) => g.rules);
    },
    stop: async () => {
      await proc.kill('SIGKILL');
      dir.remove();
    },
  };
}

/** checkMetrics runs `promtool check metrics` on `text`; answers its exit code and output (problems). */
export function checkMetrics(text: string): Promise<{ code: number; output: string }> {
  return promtool(['check', 'metrics'], text);
}

/** promtool runs `promtool <args>` (with `stdin`, if given); answers its exit code and output (stdout and stderr). */
export function promtool(args: string[], stdin = ''): Promise<{ code: number; output: string }> {
  if (promtoolBinary === undefined) return Promise.reject(new Error('promtool is not installed'));
  return new Promise((resolve, reject) => {
    const child = spawn(promtoolBinary, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr.on('data', (b: Buffer) => (output += b.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? -1, output }));
    child.stdin.end(stdin);
  });
}
