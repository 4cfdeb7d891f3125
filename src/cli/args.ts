/**
 * Command-line flags for the `bulwark` subcommands, read by `node:util`'s `parseArgs`: `--name value`,
 * `--name=value`, boolean `--flag`, short aliases (`-d 20s`, `-d20s`), and durations written as `20s`,
 * `500ms`, `2m` or a bare number of seconds. Each command owns its flags (a `FlagSpec` per flag, in the
 * command's file); this file only turns `parseArgs`'s tokens into values and its mistakes into the CLI's
 * one-line messages. Bad input is a UsageError, which the command prints and exits 2 with.
 */
import { parseArgs } from 'node:util';

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

/**
 * parseFlags reads `argv` against `specs`; unknown flags and stray arguments are UsageErrors.
 *
 * `parseArgs` runs non-strict with its tokens: its strict mode throws messages of its own ("Unknown option
 * '--colour'", a value starting with `-` is "ambiguous"), and the CLI's messages, which scripts and tests
 * match, name the flag as `--flag` and say what was wrong with it.
 */
export function parseFlags(argv: readonly string[], specs: Readonly<Record<string, FlagSpec>>): ParsedFlags {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {};
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = {
      type: spec.kind === 'boolean' ? 'boolean' : 'string',
      ...(spec.alias === undefined ? {} : { short: spec.alias }),
      ...(spec.repeat === true ? { multiple: true } : {}),
    };
  }
  const { tokens } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  const out: ParsedFlags = {};
  for (const token of tokens) {
    if (token.kind === 'positional') throw new UsageError(`unexpected argument ${JSON.stringify(token.value)}`);
    if (token.kind === 'option-terminator') throw new UsageError('unknown option --');
    const { name, rawName, value, inlineValue } = token;
    const spec = Object.hasOwn(specs, name) ? specs[name] : undefined;
    if (spec === undefined) throw new UsageError(`unknown option ${rawName}`);
    if (spec.kind === 'boolean') {
      if (value !== undefined) throw new UsageError(`--${name} takes no value`);
      out[name] = true;
      continue;
    }
    // A value that looks like the next flag (`--duration --plain`) is a forgotten value; `--name=--x` is not.
    if (value === undefined || (inlineValue !== true && value.startsWith('--'))) throw new UsageError(`--${name} needs a value`);
    if (spec.kind === 'duration') out[name] = parseDuration(name, value);
    else if (spec.kind === 'integer') {
      if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number, got ${JSON.stringify(value)}`);
      out[name] = Number(value);
    } else if (spec.repeat === true && typeof out[name] === 'string') out[name] = `${out[name]},${value}`;
    else out[name] = value;
  }
  return out;
}
