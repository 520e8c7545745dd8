// An API failure shown as the API words it: its title, its detail, and each invalid field.
import { ApiError } from '../api/client';

export function ProblemBanner({ error, onDismiss }: { error: unknown; onDismiss?: () => void }) {
  if (!error) return null;
  const p = error instanceof ApiError ? error.problem : undefined;
  const status = error instanceof ApiError ? error.status : undefined;
  const detail = p?.detail ?? (error instanceof Error ? error.message : String(error));
  return (
    <div className="banner banner-error" role="alert">
      <div className="banner-body">
        <strong>
          {p?.title ?? 'Request failed'}
          {status ? ` (${status}${p?.error ? ` ${p.error}` : ''})` : ''}
        </strong>
        <div>{detail}</div>
        {p?.errors?.length ? (
          <ul>
            {p.errors.map((e) => (
              <li key={`${e.pointer}${e.message}`}>
                {e.pointer ? <code>{e.pointer}</code> : null} {e.message}
              </li>
            ))}
          </ul>
        ) : null}
      </div>
      {onDismiss ? (
        <button type="button" className="btn btn-ghost btn-sm" onClick={onDismiss} aria-label="Dismiss">
          ✕
        </button>
      ) : null}
    </div>
  );
}
