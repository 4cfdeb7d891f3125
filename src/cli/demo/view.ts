/**
 * The demo's terminal view: a progress bar and one table row per instance (calls, errors, p50/p99
 * latency, breaker state, ejected or not). On a TTY the frame is redrawn in place with ANSI cursor
 * moves; otherwise (tests, CI, a pipe) one plain line is printed per period, so logs stay readable.
 */
import { systemClock, type Clock, type TimerHandle } from '../../core/index.js';

/** InstanceRow is what the view shows for one instance. */
export interface InstanceRow {
  readonly id: string;
  readonly address: string;
  readonly calls: number;
  readonly errors: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Breaker state as the breaker names it (e.g. `closed`, `open`, `half-open`). */
  readonly breaker: string;
  /** Ejected by outlier detection, or down by probes. */
  readonly ejected: boolean;
  /** Out of rotation because its breaker is open (the balancer's cap and panic may keep it in). */
  readonly heldOut: boolean;
}

/** ViewSnapshot is one frame's worth of numbers. */
export interface ViewSnapshot {
  readonly elapsedMs: number;
  readonly durationMs: number;
  /** Calls finished (each may have made several attempts). */
  readonly calls: number;
  /** Calls that answered (from an instance or a fallback). */
  readonly succeeded: number;
  readonly fallbacks: number;
  readonly retries: number;
  /** Attempts a breaker refused without touching the instance. */
  readonly breakerRejections: number;
  readonly registryDown: boolean;
  /** Lookups the registry cache answered from a stale entry. */
  readonly staleAnswers: number;
  readonly instances: readonly InstanceRow[];
}

/** ViewOutput is where frames go: stdout in the CLI, a buffer in tests. */
export interface ViewOutput {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

const ESC = '\x1b[';
const BAR_WIDTH = 30;

function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '—';
  if (ms < 10) return `${ms.toFixed(1)}ms`;
  if (ms < 10_000) return `${Math.round(ms)}ms`;
  return `${(ms / 1000).toFixed(1)}s`;
}

function pct(part: number, whole: number): string {
  return whole === 0 ? '—' : `${((100 * part) / whole).toFixed(1)}%`;
}

function pad(text: string, width: number, right = false): string {
  if (text.length >= width) return text;
  const fill = ' '.repeat(width - text.length);
  return right ? fill + text : text + fill;
}

function paint(color: boolean, code: string, text: string): string {
  return color ? `${ESC}${code}m${text}${ESC}0m` : text;
}

/** progressBar draws `[██████░░░░]  45%  9.0s / 20.0s`. */
export function progressBar(elapsedMs: number, durationMs: number, width = BAR_WIDTH): string {
  if (!Number.isFinite(durationMs)) return `running ${(elapsedMs / 1000).toFixed(1)}s — Ctrl-C to stop`;
  const done = Math.max(0, Math.min(1, elapsedMs / durationMs));
  const full = Math.round(done * width);
  return `[${'█'.repeat(full)}${'░'.repeat(width - full)}] ${pad(`${Math.floor(done * 100)}%`, 4, true)}  ${(Math.min(elapsedMs, durationMs) / 1000).toFixed(1)}s / ${(durationMs / 1000).toFixed(1)}s`;
}

/** renderFrame returns the lines of one full frame: bar, totals, registry line, instance table. */
export function renderFrame(s: ViewSnapshot, color: boolean): string[] {
  const lines: string[] = [];
  lines.push(`bulwark demo  ${progressBar(s.elapsedMs, s.durationMs)}`);
  lines.push(
    `calls ${s.calls}   ok ${pct(s.succeeded, s.calls)}   retries ${s.retries}   breaker rejections ${s.breakerRejections}   fallbacks ${s.fallbacks}`,
  );
  const registry = s.registryDown ? paint(color, '33', 'NOT ANSWERING (fault injected)') : paint(color, '32', 'answering');
  lines.push(`registry ${registry}   cache answered ${s.staleAnswers} lookups from stale entries`);
  lines.push('');
  lines.push(
    `${pad('instance', 10)}${pad('address', 18)}${pad('calls', 8, true)}${pad('errors', 8, true)}${pad('err %', 8, true)}${pad('p50', 9, true)}${pad('p99', 9, true)}  ${pad('breaker', 10)}health`,
  );
  for (const r of s.instances) {
    const breakerText = pad(r.breaker, 10);
    const breaker = r.breaker === 'closed' ? breakerText : paint(color, r.breaker === 'open' ? '31' : '33', breakerText);
    const health = r.ejected ? paint(color, '31', 'ejected') : r.heldOut ? paint(color, '31', 'out: breaker open') : paint(color, '32', 'in rotation');
    lines.push(
      `${pad(r.id, 10)}${pad(r.address, 18)}${pad(String(r.calls), 8, true)}${pad(String(r.errors), 8, true)}${pad(pct(r.errors, r.calls), 8, true)}${pad(fmtMs(r.p50Ms), 9, true)}${pad(fmtMs(r.p99Ms), 9, true)}  ${breaker}${health}`,
    );
  }
  return lines;
}

/** renderLine returns the one-line form used when the output is not a terminal. */
export function renderLine(s: ViewSnapshot): string {
  const rows = s.instances
    .map(
      (r) =>
        `${r.id}=${r.calls}/${r.errors}err p99=${fmtMs(r.p99Ms)}${r.breaker === 'closed' ? '' : ` breaker=${r.breaker}`}${r.ejected ? ' ejected' : r.heldOut ? ' out' : ''}`,
    )
    .join('  ');
  const total = Number.isFinite(s.durationMs) ? `${(s.durationMs / 1000).toFixed(1)}s` : '∞';
  return `[${(Math.min(s.elapsedMs, s.durationMs) / 1000).toFixed(1)}s/${total}] calls=${s.calls} ok=${pct(s.succeeded, s.calls)} retries=${s.retries} rejected=${s.breakerRejections} fallbacks=${s.fallbacks} registry=${s.registryDown ? 'down' : 'up'} stale=${s.staleAnswers}  ${rows}`;
}

/** LiveViewOptions configures a LiveView. */
export interface LiveViewOptions {
  /** Where to draw. Defaults to process.stdout. */
  output?: ViewOutput;
  /** Redraw in place with ANSI (true) or print plain lines (false). Defaults to `output.isTTY`. */
  interactive?: boolean;
  /** Time between frames in milliseconds. Defaults to 200 (interactive) or 1 000 (plain). */
  intervalMs?: number;
  /** The clock whose timer redraws. Defaults to `systemClock`. */
  clock?: Clock;
}

/** LiveView redraws a snapshot periodically until stopped. */
export class LiveView {
  private readonly output: ViewOutput;
  private readonly interactive: boolean;
  private readonly intervalMs: number;
  private readonly clock: Clock;
  private timer: TimerHandle | undefined;
  private drawnLines = 0;

  constructor(
    private readonly snapshot: () => ViewSnapshot,
    options: LiveViewOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.output = options.output ?? process.stdout;
    this.interactive = options.interactive ?? this.output.isTTY === true;
    this.intervalMs = options.intervalMs ?? (this.interactive ? 200 : 1_000);
  }

  /** start draws the first frame and schedules the next ones. */
  start(): void {
    if (this.timer !== undefined) return;
    if (this.interactive) this.output.write(`${ESC}?25l`); // hide the cursor while redrawing
    this.draw();
    this.timer = this.clock.setInterval(() => this.draw(), this.intervalMs);
    this.timer.unref();
  }

  /** redraw draws a frame now (a state change worth showing at once), between the periodic ones. */
  redraw(): void {
    if (this.timer !== undefined) this.draw();
  }

  /** stop draws the final frame and gives the cursor back. */
  stop(): void {
    if (this.timer === undefined) return;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.draw();
    if (this.interactive) this.output.write(`${ESC}?25h`);
  }

  private draw(): void {
    const s = this.snapshot();
    if (!this.interactive) {
      this.output.write(`${renderLine(s)}\n`);
      return;
    }
    const columns = this.output.columns;
    const width = columns !== undefined && columns > 0 ? Math.max(20, columns - 1) : 119;
    const lines = renderFrame(s, true).map((l) => clip(l, width));
    let text = this.drawnLines > 0 ? `${ESC}${this.drawnLines}A` : '';
    for (const l of lines) text += `\r${ESC}2K${l}\n`;
    this.drawnLines = lines.length;
    this.output.write(text);
  }
}

/** clip cuts a line to `width` visible characters, leaving ANSI colour codes whole. */
function clip(line: string, width: number): string {
  let visible = 0;
  let out = '';
  for (let i = 0; i < line.length; i++) {
    if (line[i] === '\x1b') {
      const end = line.indexOf('m', i);
      if (end !== -1) {
        out += line.slice(i, end + 1);
        i = end;
        continue;
      }
    }
    if (visible >= width) continue;
    out += line[i];
    visible++;
  }
  return out;
}
