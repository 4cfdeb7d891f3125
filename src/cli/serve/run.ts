/**
 * runServe is `bulwark serve`: read and check the configuration (a bad value → one line naming the
 * flag, exit 2), start the node, and at SIGTERM / SIGINT drain and exit 0 (a second signal exits 1 at once).
 */
import { UsageError } from '../args.js';
import { readServeConfig, serveHelp } from './config.js';
import { ServeNode } from './node.js';

/** runServe runs a node until a signal ends it; answers the exit code. */
export async function runServe(argv: string[]): Promise<number> {
  let config;
  try {
    config = readServeConfig(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`bulwark serve: ${err.message}\n`);
    return 2;
  }
  if (config === 'help') {
    process.stdout.write(serveHelp());
    return 0;
  }
  const log = config.quiet ? () => {} : (line: string) => void process.stdout.write(`${line}\n`);
  let node: ServeNode;
  try {
    node = await ServeNode.start(config, log);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why =
      e.code === 'EADDRINUSE'
        ? `--listen ${config.listenHost}:${config.listenPort} is in use`
        : e.code === 'EACCES'
          ? `--listen ${config.listenHost}:${config.listenPort}: permission denied`
          : e.message;
    process.stderr.write(`bulwark serve: ${why}\n`);
    return e instanceof TypeError || e.code === 'EADDRINUSE' || e.code === 'EACCES' || e.code === 'EADDRNOTAVAIL' ? 2 : 1;
  }
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  log(`bulwark serve: ${signal}: shutting down`);
  // A second signal ends a drain that is stuck.
  const hard = () => process.exit(1);
  process.once('SIGTERM', hard);
  process.once('SIGINT', hard);
  await node.shutdown();
  return 0;
}
