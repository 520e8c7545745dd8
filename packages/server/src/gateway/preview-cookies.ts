// Keeps a preview application's cookies to its own preview. Path-form previews share the server's origin
// (`/run/<ws>/previews/<sandbox>/<preview>/`), so a `Set-Cookie` with `Path=/run/` would reach, and could overwrite,
// the cookies of every other preview on the server (including their `bl_preview_token`): such a cookie's Path is
// rewritten to the preview's own prefix. A `Domain` attribute would widen any preview's cookie to sibling hosts
// (other sandboxes' and previews' host forms), so a cookie that carries one is dropped, in both forms.

/** True when a browser would send a cookie of Path `path` only to URLs under `base` (which ends with `/`). */
function inside(path: string, base: string): boolean {
  return path === base.slice(0, -1) || path.startsWith(base);
}

/**
 * One `Set-Cookie` value as a preview may send it: undefined when it names a Domain; its Path forced under `base`
 * (the path-form prefix) when it has none or one outside; unchanged for a host of its own (`base` = `/`).
 */
export function scopeSetCookie(value: string, base: string): string | undefined {
  const [pair, ...attrs] = value.split(';');
  let path: string | undefined;
  const kept: string[] = [];
  for (const a of attrs) {
    const eq = a.indexOf('=');
    const name = (eq < 0 ? a : a.slice(0, eq)).trim().toLowerCase();
    const v = eq < 0 ? '' : a.slice(eq + 1).trim();
    if (name === 'domain') return undefined;
    if (name === 'path') path = v;
    else kept.push(a.trim());
  }
  if (base === '/') return value;
  if (path === undefined || !inside(path, base)) path = base;
  return [pair.trim(), `Path=${path}`, ...kept].join('; ');
}

/** Every `Set-Cookie` of a preview's answer through scopeSetCookie; undefined when none is left. */
export function scopeSetCookies(values: string | string[] | undefined, base: string): string[] | undefined {
  if (values === undefined) return undefined;
  const out: string[] = [];
  for (const v of Array.isArray(values) ? values : [values]) {
    const scoped = scopeSetCookie(v, base);
    if (scoped !== undefined) out.push(scoped);
  }
  return out.length ? out : undefined;
}

/** A raw HTTP response head (an upgrade's answer, tunnelled as bytes) with its Set-Cookie lines scoped. */
export function scopeResponseHead(head: string, base: string): string {
  const lines = head.split('\r\n');
  const out: string[] = [];
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'set-cookie') {
      const scoped = scopeSetCookie(line.slice(colon + 1).trim(), base);
      if (scoped !== undefined) out.push(`Set-Cookie: ${scoped}`);
    } else out.push(line);
  }
  return out.join('\r\n');
}
