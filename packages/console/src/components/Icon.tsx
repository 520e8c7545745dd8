// The navigation's icons: simple strokes drawn here (no icon font, nothing the CSP would have to allow).
const PATHS: Record<string, string> = {
  overview: 'M3 12a9 9 0 1 0 18 0a9 9 0 1 0-18 0M12 7v5l3 3',
  sandbox: 'M4 5h16v14H4zM8 10l3 2-3 2M13 15h3',
  agent: 'M12 3l2.5 5.5L20 11l-5.5 2.5L12 19l-2.5-5.5L4 11l5.5-2.5z',
  mcp: 'M8 8h8v8H8zM12 3v5M12 16v5M3 12h5M16 12h5',
  job: 'M5 6h14M5 12h14M5 18h9',
  model: 'M12 3l8 4.5v9L12 21l-8-4.5v-9zM12 12l8-4.5M12 12v9M12 12L4 7.5',
  policy: 'M12 3l7 3v6c0 4.5-3 7.5-7 9-4-1.5-7-4.5-7-9V6z',
  connection: 'M7 7h10l-3-3M17 17H7l3 3',
  volume: 'M4 7c0-2 16-2 16 0v10c0 2-16 2-16 0zM4 7c0 2 16 2 16 0',
  drive: 'M3 14h18v5H3zM5 14l2-8h10l2 8M7 16.5h2',
  image: 'M4 5h16v14H4zM4 15l5-5 4 4 2-2 5 5',
  key: 'M14 10a4 4 0 1 0-1 2.6L20 20M17 17l2-2',
  members:
    'M9 11a3 3 0 1 0 0-6a3 3 0 1 0 0 6M3 20c0-3.5 3-6 6-6s6 2.5 6 6M16 5.5a3 3 0 0 1 0 5.5M18 14c2 .7 3 3 3 6',
};

export function Icon({ name, size = 18 }: { name: string; size?: number }) {
  return (
    <svg
      width={size}
      height={size}
      viewBox="0 0 24 24"
      fill="none"
      stroke="currentColor"
      strokeWidth={1.8}
      strokeLinecap="round"
      strokeLinejoin="round"
      aria-hidden="true"
    >
      <path d={PATHS[name] ?? PATHS.overview} />
    </svg>
  );
}
