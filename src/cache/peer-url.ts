/** Peer URLs: http(s) origins, compared in their normalized form. */

/** normalizePeerUrl checks that `url` is an http(s) origin and answers it without a trailing slash. */
export function normalizePeerUrl(owner: string, name: string, url: unknown): string {
  let u: URL;
  try {
    u = new URL(String(url));
  } catch {
    throw new TypeError(`${owner}: ${name} must be an http(s) URL, got ${JSON.stringify(url)}`);
  }
  if (
    (u.protocol !== 'http:' && u.protocol !== 'https:') ||
    typeof url !== 'string' ||
    u.username ||
    u.password ||
    u.search ||
    u.hash ||
    (u.pathname !== '/' && u.pathname !== '')
  ) {
    throw new TypeError(`${owner}: ${name} must be an http(s) origin like http://10.0.0.1:8080, got ${JSON.stringify(url)}`);
  }
  return u.origin;
}
