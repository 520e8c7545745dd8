// The shell examples of a guide, as the docs test runs them: every ```sh block of a Markdown file, in
// order, with the marker that may precede it. A marker is an HTML comment on the line just above the fence
// (invisible when rendered):
//   <!-- docs-test: skip (why) -->   never run (it installs or starts a server, or waits for a person)
//   <!-- docs-test: sandboxes -->    needs root and the sandbox runtime (run under the runtime lock)

export type BlockKind = 'run' | 'skip' | 'sandboxes';

export interface GuideBlock {
  /** 1-based line of the opening fence, for messages. */
  line: number;
  kind: BlockKind;
  /** Why a skipped block is skipped, as its marker says. */
  reason?: string;
  code: string;
}

const MARKER = /^<!--\s*docs-test:\s*(skip|sandboxes)\b\s*(.*?)\s*-->$/;

export function shellBlocks(markdown: string): GuideBlock[] {
  const lines = markdown.split('\n');
  const blocks: GuideBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})(\S*)/.exec(lines[i]);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith(open[1]) && l.trim() === open[1]);
    if (end < 0) throw new Error(`line ${i + 1}: a code block that never closes`);
    if (open[2] === 'sh' || open[2] === 'bash') {
      const marker = MARKER.exec(lines[i - 1]?.trim() ?? '');
      blocks.push({
        line: i + 1,
        kind: (marker?.[1] as BlockKind) ?? 'run',
        ...(marker?.[2] ? { reason: marker[2].replace(/^\((.*)\)$/, '$1') } : {}),
        code: lines.slice(i + 1, end).join('\n'),
      });
    }
    i = end;
  }
  return blocks;
}

/** What the test changes in a guide's text: the guides address a server on the default port and real providers. */
export interface Substitutions {
  serverUrl: string;
  /** Where connections of integration openai/anthropic are pointed instead of the vendor (a fake provider). */
  providerUrl: string;
}

export function substitute(code: string, s: Substitutions): string {
  return (
    code
      .replaceAll('http://127.0.0.1:8080', s.serverUrl)
      // JSON bodies (`"integration":"openai"`) and YAML flow mappings (`integration: openai,`).
      .replace(/"integration"\s*:\s*"(openai|anthropic)"/g, `$&,"config":{"baseUrl":"${s.providerUrl}"}`)
      .replace(/\bintegration: (openai|anthropic),/g, `$& config: { baseUrl: "${s.providerUrl}" },`)
  );
}
