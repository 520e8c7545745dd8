// A Prometheus histogram observed in plain numbers and rendered by prom-client's registry at scrape time as its own
// Histogram renders (cumulative `_bucket` series with `le`, then `+Inf`, `_sum`, `_count`). prom-client hashes a
// child's labels on every observe; a series here is looked up once by its caller and observed with a few adds.
// The API's route latency (api/metrics.ts, decision 066) and the model gateway's histograms (decision 075) are these.

type Labels = Record<string, string>;

export interface PlainSeries {
  observe(value: number): void;
}

interface Series {
  labels: Labels;
  buckets: number[];
  sum: number;
  count: number;
}

export class PlainHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
  ) {}

  /**
   * The series of `labels`, kept under `key` (the labels' values, joined so that distinct labels differ). It is
   * rendered from its first observation on, as prom-client's children are.
   */
  child(key: string, labels: Labels): PlainSeries {
    const { bounds } = this;
    let s = this.series.get(key);
    return {
      observe: (value: number) => {
        if (!s) {
          s = this.series.get(key) ?? { labels, buckets: bounds.map(() => 0), sum: 0, count: 0 };
          this.series.set(key, s);
        }
        let i = 0;
        while (i < bounds.length && value > bounds[i]) i++;
        if (i < bounds.length) s.buckets[i]++;
        s.sum += value;
        s.count++;
      },
    };
  }

  /** Zeroes every series in place: children handed out keep observing into the registry. */
  reset() {
    for (const s of this.series.values()) {
      s.buckets.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }

  async get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const s of this.series.values()) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += s.buckets[i];
        values.push({ labels: { le, ...s.labels }, value: acc, metricName: `${this.name}_bucket` });
      });
      values.push(
        { labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${this.name}_bucket` },
        { labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` },
        { labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
