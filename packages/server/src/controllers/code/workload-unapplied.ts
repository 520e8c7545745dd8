// Fields of an agent, function or job that are stored but not acted on yet (decisions 023, 025, 026). Named in the
// DEPLOYED message so none of them passes as if it worked.

/** The field paths of `spec` this server keeps but does not honour, for one kind. */
export function unappliedWorkloadFields(kind: string, spec: any): string[] {
  const out: string[] = [];
  const s = spec ?? {};
  if (kind !== 'Job') {
    for (const t of Array.isArray(s.triggers) ? s.triggers : []) {
      // Refused at write (kinds/function.ts); a function stored before that still has it named.
      if ((t?.type === 'schedule' || t?.type === 'cron') && kind === 'Function')
        out.push(`triggers[${t.id ?? t.type}] (${t.type})`);
      // http and http-async triggers' paths are served (kinds/trigger-path.ts); a schedule has nothing to serve.
      else if (t?.configuration?.path && t.type !== 'http' && t.type !== 'http-async')
        out.push(`triggers[${t.id ?? t.type}].configuration.path`);
    }
  }
  return out;
}

/** The suffix of a DEPLOYED message: empty when everything asked is honoured. */
export function unappliedWorkloadNote(kind: string, spec: any): string {
  const fields = unappliedWorkloadFields(kind, spec);
  return fields.length ? `; not applied yet: ${fields.join(', ')}` : '';
}
