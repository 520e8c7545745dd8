// Integration connections (provider credentials): listed with their provider and address, never their secrets
// (the console never asks for show_secrets).
import { KindTable } from '../components/KindTable';
import { PageHead } from '../components/Page';
import { StatusBadge } from '../components/Status';

export default function Connections() {
  return (
    <div className="stack">
      <PageHead
        title="Connections"
        sub="Credentials of model providers and APIs. Secrets are never shown here."
      />
      <KindTable
        plural="integrationconnections"
        path="/integrations/connections"
        label="Connections"
        columns={[
          {
            label: 'Integration',
            render: (o) => <span className="badge plain badge-accent">{o.spec?.integration}</span>,
          },
          {
            label: 'Address',
            render: (o) => <span className="mono">{o.spec?.config?.baseUrl ?? 'provider default'}</span>,
          },
          {
            label: 'Secrets',
            render: (o) =>
              Object.keys(o.spec?.secret ?? {})
                .map((k) => `${k}: ••••`)
                .join(', ') || '—',
          },
          { label: 'Status', render: (o) => <StatusBadge status={o.status} /> },
        ]}
        empty="No connections."
      />
    </div>
  );
}
