/**
 * Command-line flag parsing for the `bulwark` subcommands: `--name value`, `--name=value`, boolean
 * `--flag`, short aliases, and durations written as `20s`, `500ms`, `2m` or a bare number of seconds.
 * Bad input is a UsageError, which main.ts prints with the command's help and exit code 2.
 */

/** UsageError is a mistake on the command line; the message says which flag and what was wrong. */
export class UsageError extends Error {
  override get name(): string {
    return 'UsageError';
  }
}

/** FlagSpec describes one flag: its kind and an optional one-letter alias. */
export interface FlagSpec {
  readonly kind: 'boolean' | 'string' | 'duration' | 'integer';
  readonly alias?: string;
  /** A string flag that may be given several times; its values are joined with commas. Defaults to false. */
  readonly repeat?: boolean;
}

/** ParsedFlags maps flag names to values: booleans, strings, or numbers (durations in milliseconds). */
export type ParsedFlags = Record<string, string | number | boolean>;

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** parseDuration reads `20s`, `500ms`, `1.5m`, `1h` or a bare number of seconds into milliseconds. */
export function parseDuration(flag: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (m === null) throw new UsageError(`--${flag} must be a duration like 20s, 500ms or 2m, got ${JSON.stringify(text)}`);
  const ms = Number(m[1]) * UNITS[m[2] ?? 's']!;
  if (!Number.isFinite(ms) || ms <= 0) throw new UsageError(`--${flag} must be longer than 0, got ${JSON.stringify(text)}`);
  return Math.round(ms);
}

/** parseFlags reads `argv` against `specs`; unknown flags and stray arguments are UsageErrors. */
export function parseFlags(argv: readonly string[], specs: Readonly<Record<string, FlagSpec>>): ParsedFlags {
  const out: ParsedFlags = {};
  const byAlias = new Map<string, string>();
  for (const [name, spec] of Object.entries(specs)) if (spec.alias !== undefined) byAlias.set(spec.alias, name);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    let name: string | undefined;
    let inline: string | undefined;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
      if (eq !== -1) inline = arg.slice(eq + 1);
    } else if (/^-[A-Za-z]$/.test(arg)) {
      name = byAlias.get(arg.slice(1));
      if (name === undefined) throw new UsageError(`unknown option ${arg}`);
    } else {
      throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    }
    const spec = Object.hasOwn(specs, name) ? specs[name] : undefined;
    if (spec === undefined) throw new UsageError(`unknown option --${name}`);
    if (spec.kind === 'boolean') {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
      out[name] = true;
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined || (inline === undefined && value.startsWith('--'))) throw new UsageError(`--${name} needs a value`);
    if (spec.kind === 'duration') out[name] = parseDuration(name, value);
    else if (spec.kind === 'integer') {
      if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number, got ${JSON.stringify(value)}`);
      out[name] = Number(value);
    } else if (spec.repeat === true && typeof out[name] === 'string') out[name] = `${out[name]},${value}`;
    else out[name] = value;
  }
  return out;
}
