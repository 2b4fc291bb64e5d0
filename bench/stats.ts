// Small statistics and the way the benchmarks print figures.

export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The q-quantile (0..1) by nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) throw new RangeError('quantile of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export function rate(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

export function ms(value: number): string {
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

export function ratio(value: number): string {
  return value.toFixed(2);
}

/** The least-squares slope of `values` taken one a step. */
export function slope(values: readonly number[]): number {
  const meanX = (values.length - 1) / 2;
  const meanY = values.reduce((sum, y) => sum + y, 0) / values.length;
  let across = 0;
  let spread = 0;
  values.forEach((y, x) => {
    across += (x - meanX) * (y - meanY);
    spread += (x - meanX) ** 2;
  });
  return across / spread;
}
