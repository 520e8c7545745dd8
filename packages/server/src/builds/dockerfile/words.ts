// Docker's word processing for the instructions whose arguments the builder (not a shell) reads: FROM, COPY, ADD, ENV,
// ARG, LABEL, WORKDIR, USER, EXPOSE. Quotes group and are removed ('…' keeps everything literal, "…" expands), the
// escape character keeps the next character literal, and $NAME, ${NAME}, ${NAME:-default} and ${NAME:+alternative}
// expand from the variables in scope (an unset one is empty), as moby's shell lexer does. RUN, CMD and ENTRYPOINT in
// shell form are left to the image's shell.

export type Vars = ReadonlyMap<string, string>;

export class WordError extends Error {
  override name = 'WordError';
}

/** Expands `text` into one string (quotes removed, variables expanded): an ENV value, a WORKDIR, a USER. */
export function expandWord(text: string, vars: Vars, escapeChar = '\\'): string {
  return lex(text, vars, escapeChar, false).join('');
}

/** Splits `text` on unquoted blanks into expanded words: the sources and destination of a COPY, EXPOSE's ports. */
export function expandWords(text: string, vars: Vars, escapeChar = '\\'): string[] {
  return lex(text, vars, escapeChar, true);
}

function lex(text: string, vars: Vars, esc: string, split: boolean): string[] {
  const words: string[] = [];
  let cur = '';
  let started = false;
  let i = 0;
  const flush = () => {
    if (started) words.push(cur);
    cur = '';
    started = false;
  };
  while (i < text.length) {
    const c = text[i];
    if (split && /\s/.test(c)) {
      flush();
      i++;
      continue;
    }
    started = true;
    if (c === esc && i + 1 < text.length) {
      cur += text[i + 1];
      i += 2;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new WordError(`unterminated single quote in ${JSON.stringify(text)}`);
      cur += text.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      i++;
      for (;;) {
        if (i >= text.length) throw new WordError(`unterminated double quote in ${JSON.stringify(text)}`);
        const d = text[i];
        if (d === '"') {
          i++;
          break;
        }
        if (d === esc && i + 1 < text.length && '"$`\\'.includes(text[i + 1])) {
          cur += text[i + 1];
          i += 2;
        } else if (d === '$') {
          const [value, next] = variable(text, i, vars);
          cur += value;
          i = next;
        } else {
          cur += d;
          i++;
        }
      }
    } else if (c === '$') {
      const [value, next] = variable(text, i, vars);
      // Unquoted, a value's blanks split words too (moby's ProcessWords).
      for (const ch of value) {
        if (split && /\s/.test(ch)) flush();
        else {
          cur += ch;
          started = true;
        }
      }
      i = next;
    } else {
      cur += c;
      i++;
    }
  }
  flush();
  return words;
}

/** The variable at `text[at]` (a `$`): its value and where the text goes on. */
function variable(text: string, at: number, vars: Vars): [string, number] {
  const plain = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(at + 1));
  if (plain) return [vars.get(plain[0]) ?? '', at + 1 + plain[0].length];
  if (text[at + 1] !== '{') return ['$', at + 1];
  const end = text.indexOf('}', at + 2);
  if (end < 0) throw new WordError(`missing } in ${JSON.stringify(text)}`);
  const body = text.slice(at + 2, end);
  const m = /^([A-Za-z_][A-Za-z0-9_]*)(?::([-+])(.*))?$/s.exec(body);
  if (!m)
    throw new WordError(
      `unsupported variable form \${${body}} (use $NAME, \${NAME}, \${NAME:-x} or \${NAME:+x})`,
    );
  const value = vars.get(m[1]);
  const set = value !== undefined && value !== '';
  if (m[2] === '-') return [set ? (value as string) : expandWord(m[3], vars), end + 1];
  if (m[2] === '+') return [set ? expandWord(m[3], vars) : '', end + 1];
  return [value ?? '', end + 1];
}
