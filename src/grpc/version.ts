/**
 * The supported range of `@grpc/grpc-js` and the check made at setup. The resolver and load-balancing
 * hooks bulwark uses live in grpc-js's `experimental` namespace, whose shape changed in 1.14 (resolver
 * listeners and LB policies take `StatusOr` endpoint lists), so the range is the tested minor.
 */
import { createRequire } from 'node:module';
import { UnsupportedVersionError } from '../core/errors.js';

/** SUPPORTED_GRPC_JS is the range of `@grpc/grpc-js` versions bulwark/grpc is tested with. */
export const SUPPORTED_GRPC_JS = '~1.14';
const MAJOR = 1;
const MINOR = 14;

/**
 * checkGrpcJsVersion throws UnsupportedVersionError unless `version` is in `~1.14` (1.14.x, pre-releases
 * excluded); the message names the installed version and the supported range.
 */
export function checkGrpcJsVersion(version: unknown): void {
  const m = typeof version === 'string' ? /^(\d+)\.(\d+)\.(\d+)$/.exec(version) : null;
  if (m === null || Number(m[1]) !== MAJOR || Number(m[2]) !== MINOR) {
    throw new UnsupportedVersionError(
      `bulwark/grpc supports @grpc/grpc-js ${SUPPORTED_GRPC_JS} (1.14.x), but ${typeof version === 'string' ? version : String(version)} is installed; install @grpc/grpc-js@${SUPPORTED_GRPC_JS}`,
    );
  }
}

let checked = false;

/** installedGrpcJsVersion reads the version of the `@grpc/grpc-js` this module resolves to. */
export function installedGrpcJsVersion(): string {
  const require = createRequire(import.meta.url);
  const pkg = require('@grpc/grpc-js/package.json') as { version?: unknown };
  return String(pkg.version);
}

/** ensureGrpcJs checks the installed grpc-js once per process (every bulwark/grpc constructor calls it). */
export function ensureGrpcJs(): void {
  if (checked) return;
  checkGrpcJsVersion(installedGrpcJsVersion());
  checked = true;
}
