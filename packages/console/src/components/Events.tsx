// An object's events, newest first.
import { ago, when } from './format';
import { StatusBadge } from './Status';
import { Empty } from './Page';

export function EventList({ events }: { events?: any[] }) {
  const list = [...(events ?? [])].reverse().slice(0, 50);
  if (!list.length) return <Empty>No events.</Empty>;
  return (
    <ul className="event-list">
      {list.map((e) => (
        <li key={`${e.time}|${e.status}|${e.message}`}>
          <span className="event-time" title={when(e.time)}>
            {ago(e.time)}
          </span>
          <span>
            {e.status ? <StatusBadge status={e.status} /> : null} {e.message}
          </span>
        </li>
      ))}
    </ul>
  );
}

export function JsonView({ value }: { value: unknown }) {
  return <pre className="json">{JSON.stringify(value, null, 2)}</pre>;
}
