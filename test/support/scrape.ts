/**
 * sampleValue answers the value of one series in a Prometheus text exposition (the text, or its lines),
 * or undefined when it has no such sample. `series` is the name with its labels as the exposition
 * writes them, e.g. `bulwark_breaker_state{name="a",state="open"}`.
 */
export function sampleValue(exposition: string | readonly string[], series: string): number | undefined {
  const lines = typeof exposition === 'string' ? exposition.split('\n') : exposition;
  const l = lines.find((x) => x.startsWith(`${series} `));
  return l === undefined ? undefined : Number(l.slice(series.length + 1));
}
