// Text that grows as a stream is read (a build log, a task's output, a process's logs), following the end.
import { useEffect, useRef, useState } from 'react';
import { followText, type RequestOptions } from '../api/client';
import { ProblemBanner } from './ProblemBanner';

/** Reads `path` (streamed when it follows) while mounted; `restart` changes to read it again. */
export function useFollowedText(
  path: string | null,
  restart: unknown = 0,
  opts: Omit<RequestOptions, 'signal'> = {},
) {
  const [text, setText] = useState('');
  const [error, setError] = useState<unknown>();
  const [ended, setEnded] = useState(false);
  // biome-ignore lint/correctness/useExhaustiveDependencies: opts are fixed per path
  useEffect(() => {
    setText('');
    setError(undefined);
    setEnded(false);
    if (!path) return;
    const ac = new AbortController();
    followText(path, (t) => setText((x) => (x.length > 2_000_000 ? x.slice(-1_000_000) : x) + t), {
      ...opts,
      signal: ac.signal,
    }).then(
      () => !ac.signal.aborted && setEnded(true),
      (err) => !ac.signal.aborted && setError(err),
    );
    return () => ac.abort();
  }, [path, restart]);
  return { text, error, ended };
}

export function LogView({
  text,
  error,
  empty = 'No output yet.',
  tall,
  label,
}: {
  text: string;
  error?: unknown;
  empty?: string;
  tall?: boolean;
  label: string;
}) {
  const ref = useRef<HTMLPreElement>(null);
  const stick = useRef(true);
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs after each new chunk of text
  useEffect(() => {
    const el = ref.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [text]);
  return (
    <div className="stack">
      <ProblemBanner error={error} />
      <pre
        ref={ref}
        className={`log${tall ? ' tall' : ''}`}
        role="log"
        aria-label={label}
        aria-live="polite"
        // biome-ignore lint/a11y/noNoninteractiveTabindex: the log scrolls by keyboard too
        tabIndex={0}
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
        }}
      >
        {text || <span className="muted">{empty}</span>}
      </pre>
    </div>
  );
}
