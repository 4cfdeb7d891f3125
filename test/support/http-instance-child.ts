/**
 * One instance of a payments service as a process of its own, for tests that kill it for real:
 *   node --import <loader> test/support/http-instance-child.ts <port> ok|flaky|peer [answered-file]
 * `ok` answers every request 200; `flaky` answers every other request 500 (the first one fails);
 * `peer` answers every request as a cache peer holding the value `paid` (a protobuf GetResponse).
 * With `answered-file`, it appends a line there once each answer is handed to the kernel, so that a
 * test can tell (synchronously) that an answer is on its way. It listens on 127.0.0.1:<port> until it
 * is killed.
 */
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { encodeGetResponse } from '../../src/cache/codec.js';

const [port, mode, answeredFile] = process.argv.slice(2);
let n = 0;
const server = createServer((_req, res) => {
  const answered = answeredFile === undefined ? undefined : () => appendFileSync(answeredFile, 'answered\n');
  if (mode === 'peer')
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(encodeGetResponse({ value: 'paid', ttlMs: 0, notFound: false }), answered);
  else if (mode === 'flaky' && n++ % 2 === 0) res.writeHead(500).end('flaky', answered);
  else res.writeHead(200, { 'content-type': 'text/plain' }).end('paid', answered);
});
server.listen(Number(port), '127.0.0.1', () => console.log('ready'));
