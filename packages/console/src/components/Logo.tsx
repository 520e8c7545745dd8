export function Logo({ size = 24 }: { size?: number }) {
  return (
    <svg width={size} height={size} viewBox="0 0 32 32" aria-hidden="true" className="logo">
      <rect width="32" height="32" rx="7" className="logo-bg" />
      <path d="M8 20h16l-3 5H11z" fill="#fff" />
      <path d="M15 7v11h2V7zm2 1 6 8h-6z" fill="#fff" />
    </svg>
  );
}
