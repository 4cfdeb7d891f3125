/**
 * Test helper (not a test): the type check of the docs examples (docs.test.ts, check 3), run as a process
 * of its own so that it overlaps the examples' runs instead of blocking the test's event loop for
 * seconds. Reads the fragments as JSON on stdin, writes the diagnostics by file as JSON on stdout:
 *   node --import tsx test/docs-typecheck.ts < fragments.json
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** CheckFragment is one block as TypeScript checks it: its module source and where its lines are on the page. */
export interface CheckFragment {
  /** file name in the check folder, e.g. `cache-2.ts`. */
  file: string;
  /** the block made a module, with its `declare` prelude. */
  source: string;
  page: string;
  /** page line of the block's first code line. */
  line: number;
  /** lines of the prelude before the block's first line. */
  offset: number;
}

/**
 * typeCheck writes every fragment to `dir` as a module of its own, builds one program of them all with
 * 'bulwark' and 'bulwark/<module>' mapped to the built declarations, and answers the diagnostics of each
 * fragment by file ('*' for a broken configuration), as `docs/<page>:<line>: TS<code> <message>`.
 */
export function typeCheck(dir: string, fragments: readonly CheckFragment[]): Record<string, string[]> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const f of fragments) writeFileSync(join(dir, f.file), f.source);
  const tsconfig = {
    extends: '../../tsconfig.json',
    compilerOptions: {
      noEmit: true,
      declaration: false,
      sourceMap: false,
      noUnusedLocals: false,
      noUnusedParameters: false,
      allowImportingTsExtensions: true,
      paths: { bulwark: ['../../dist/index.d.ts'], 'bulwark/*': ['../../dist/*/index.d.ts'] },
    },
    include: ['*.ts'],
  };
  const configPath = join(dir, 'tsconfig.json');
  writeFileSync(configPath, JSON.stringify(tsconfig, null, 2));
  const byFile: Record<string, string[]> = {};
  const config = ts.getParsedCommandLineOfConfigFile(
    configPath,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => (byFile['*'] = [ts.flattenDiagnosticMessageText(d.messageText, '\n')]),
    },
  );
  if (config === undefined) return byFile;
  // Per file, syntactic and semantic: one fragment's syntax error must not hide another's type errors.
  const program = ts.createProgram(config.fileNames, config.options);
  for (const f of fragments) {
    const sf = program.getSourceFile(join(dir, f.file));
    if (sf === undefined) {
      byFile[f.file] = ['not in the program'];
      continue;
    }
    const diags = [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)];
    const lines = diags.map((d) => {
      const at = d.start === undefined ? 0 : sf.getLineAndCharacterOfPosition(d.start).line;
      return `docs/${f.page}:${f.line + at - f.offset}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, '\n  ')}`;
    });
    if (lines.length > 0) byFile[f.file] = lines;
  }
  return byFile;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const input = JSON.parse(readFileSync(0, 'utf8')) as { dir: string; fragments: CheckFragment[] };
  process.stdout.write(JSON.stringify(typeCheck(input.dir, input.fragments)));
}
