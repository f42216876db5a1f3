// The package ships no types: it parses the Prometheus text format into prom2json-shaped families.
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
