// Shell-style name patterns (`*.ts`, `test_?.py`, `[ab]*`, `*.{js,ts}`) matched against a base name.

export type NameMatcher = (name: string) => boolean;

export function globMatcher(patterns: string[]): NameMatcher {
  if (patterns.length === 0) return () => true;
  const res = patterns.map(globToRegExp);
  return (name) => res.some((re) => re.test(name));
}

export function globToRegExp(glob: string): RegExp {
  let re = '';
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const close = glob.indexOf(']', i + 2);
      if (close < 0) {
        re += '\\[';
        continue;
      }
      let body = glob.slice(i + 1, close);
      if (body.startsWith('!')) body = `^${body.slice(1)}`;
      re += `[${body.replace(/\\/g, '\\\\')}]`;
      i = close;
    } else if (c === '{') {
      braces++;
      re += '(?:';
    } else if (c === '}' && braces > 0) {
      braces--;
      re += ')';
    } else if (c === ',' && braces > 0) re += '|';
    else re += c.replace(/[.+^$()|\\/{}]/g, '\\$&');
  }
  return new RegExp(`^${re}${')'.repeat(braces)}$`);
}
