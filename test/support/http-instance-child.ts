/**
 * One instance of a payments service as a process of its own, for tests that kill it for real:
 *   node --import <loader> test/support/http-instance-child.ts <port> ok|flaky
 * `ok` answers every request 200; `flaky` answers every other request 500 (the first one fails).
 * It listens on 127.0.0.1:<port> until it is killed.
 */
import { createServer } from 'node:http';

const [port, mode] = process.argv.slice(2);
let n = 0;
const server = createServer((_req, res) => {
  if (mode === 'flaky' && n++ % 2 === 0) res.writeHead(500).end('flaky');
  else res.writeHead(200, { 'content-type': 'text/plain' }).end('paid');
});
server.listen(Number(port), '127.0.0.1', () => console.log('ready'));
