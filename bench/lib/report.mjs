// Prints one benchmark figure beside its same-run baseline and the ratio.
export function row(name, value, baseline, unit, target) {
  const ratio = baseline ? value / baseline : Number.NaN;
  const fmt = (v) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(2)) : 'n/a');
  console.log(
    `${name.padEnd(56)} ${fmt(value).padStart(10)} ${unit.padEnd(6)} baseline ${fmt(baseline).padStart(10)}  ratio ${fmt(ratio).padStart(6)}${target ? `  target ${target}` : ''}`,
  );
  return ratio;
}

export function header(title) {
  console.log(`\n== ${title} ==`);
}
