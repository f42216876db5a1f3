// PostgreSQL array literals, for the parameters that carry many rows in one statement
// (`unnest($1::int[], $2::text[], …)`). node-pg encodes a JS array element by element (type checks,
// two regular expressions per text, a Date formatted in local time): on the webhook endpoint that
// was 3 µs a call in the CPU profile of bench:webhook, for text PostgreSQL parses all the same.

/** `{1,2.5,NULL}`. */
export function numberArray(values: readonly (number | null)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) out += ',';
    out += v === null || v === undefined ? 'NULL' : String(v);
  }
  return `${out}}`;
}

/** `{"a","say \"hi\"",NULL}`: every text quoted, `\` and `"` escaped. */
export function textArray(values: readonly (string | null)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) out += ',';
    if (v === null || v === undefined) out += 'NULL';
    else out += v.includes('"') || v.includes('\\') ? `"${v.replace(/[\\"]/g, '\\$&')}"` : `"${v}"`;
  }
  return `${out}}`;
}
