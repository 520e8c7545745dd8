// A live list of one kind: pages read with the API's cursors, kept current by GET /v0/watch (no polling per row).
// The watch opens first; once it is SYNCED the first page is read. Changes that arrive while a page is being read
// are applied again after it, in order, so the newest state always wins.
import { useCallback, useEffect, useRef, useState } from 'react';
import { listPage } from '../api/client';
import { watch, type WatchEvent } from '../api/watch';

export const PAGE_SIZE = 200;

export interface LiveList<T> {
  items: T[];
  loading: boolean;
  error: unknown;
  hasMore: boolean;
  loadMore: () => void;
  /** The last change seen of each object, for charts over time. */
  lastEvent?: WatchEvent;
}

const nameOf = (o: any): string => o?.metadata?.name ?? o?.name;

export function useLiveList<T = any>(
  plural: string,
  path: string,
  opts: { parent?: string; pageSize?: number } = {},
): LiveList<T> {
  const [version, setVersion] = useState(0);
  const rows = useRef(new Map<string, T>());
  const [state, setState] = useState<{
    loading: boolean;
    error?: unknown;
    next?: string;
    lastEvent?: WatchEvent;
  }>({
    loading: true,
  });
  const busy = useRef<WatchEvent[] | null>(null);
  const pageSize = opts.pageSize ?? PAGE_SIZE;
  const nextRef = useRef<string | undefined>(undefined);
  const ctl = useRef<AbortController | null>(null);

  const apply = useCallback(
    (e: WatchEvent) => {
      if (opts.parent !== undefined && e.parent !== opts.parent) return;
      const n = nameOf(e.object);
      if (e.type === 'DELETED') rows.current.delete(n);
      else rows.current.set(n, e.object);
    },
    [opts.parent],
  );

  const load = useCallback(
    async (cursor: string | undefined) => {
      busy.current = [];
      try {
        const page = await listPage<T>(path, { limit: pageSize, cursor, signal: ctl.current?.signal });
        if (!cursor) rows.current.clear();
        for (const o of page.items) rows.current.set(nameOf(o), o);
        for (const e of busy.current ?? []) apply(e);
        nextRef.current = page.next;
        setState((s) => ({ ...s, loading: false, error: undefined, next: page.next }));
      } catch (error) {
        if (!ctl.current?.signal.aborted) setState((s) => ({ ...s, loading: false, error }));
      } finally {
        busy.current = null;
        setVersion((v) => v + 1);
      }
    },
    [path, pageSize, apply],
  );

  useEffect(() => {
    const ac = new AbortController();
    ctl.current = ac;
    rows.current = new Map();
    setState({ loading: true });
    watch(
      [plural],
      { initial: false },
      {
        onEvent(e) {
          busy.current?.push(e);
          apply(e);
          setState((s) => ({ ...s, lastEvent: e }));
          setVersion((v) => v + 1);
        },
        // (Re)connected: read the list from the start (a dropped stream may have missed changes).
        onSynced: () => void load(undefined),
        onError: (error) => setState((s) => ({ ...s, loading: false, error })),
      },
      ac.signal,
    );
    return () => ac.abort();
  }, [plural, load, apply]);

  const loadMore = useCallback(() => {
    if (nextRef.current && !busy.current) void load(nextRef.current);
  }, [load]);

  const items = useMemoSorted(rows.current, version);
  return {
    items,
    loading: state.loading,
    error: state.error,
    hasMore: !!state.next,
    loadMore,
    lastEvent: state.lastEvent,
  };
}

function useMemoSorted<T>(map: Map<string, T>, version: number): T[] {
  const memo = useRef<{ v: number; items: T[] }>({ v: -1, items: [] });
  if (memo.current.v !== version) {
    memo.current = {
      v: version,
      items: [...map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, o]) => o),
    };
  }
  return memo.current.items;
}

/** One object, kept current by the watch of its kind. */
export function useLiveObject<T = any>(plural: string, name: string, load: () => Promise<T>) {
  const [obj, setObj] = useState<T | undefined>();
  const [error, setError] = useState<unknown>();
  const [gone, setGone] = useState(false);
  const [lastEvent, setLastEvent] = useState<WatchEvent>();
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    const ac = new AbortController();
    setObj(undefined);
    setGone(false);
    watch(
      [plural],
      { initial: false },
      {
        onEvent(e) {
          if (nameOf(e.object) !== name) return;
          setLastEvent(e);
          if (e.type === 'DELETED') setGone(true);
          else {
            setGone(false);
            setObj(e.object);
          }
        },
        onSynced: () =>
          void loadRef.current().then(
            (o) => {
              if (ac.signal.aborted) return;
              setObj(o);
              setError(undefined);
            },
            (err) => !ac.signal.aborted && setError(err),
          ),
        onError: setError,
      },
      ac.signal,
    );
    return () => ac.abort();
  }, [plural, name]);
  return { obj, error, gone, lastEvent };
}
