/**
 * A request body's JSON text assembled from pieces in one copy.
 *
 * `a + b` makes a rope that V8 copies into a flat string when it is read (to count or encode its
 * bytes), and `parts.join(",")` copies every part: a body built as `head + "[" + parts.join(",") +
 * "]" + tail` copies the whole history twice. `joinBetween` copies it once.
 *
 * @example
 * ```ts
 * joinBetween('{"messages":[', ['{"a":1}', '{"b":2}'], "]}") // '{"messages":[{"a":1},{"b":2}]}'
 * ```
 */

/** `prefix + parts.join(",") + suffix`, as one flat string made in one copy. */
export const joinBetween = (prefix: string, parts: ReadonlyArray<string>, suffix: string): string => {
  const n = parts.length
  if (n === 0) return [prefix, suffix].join("")
  if (n === 1) return [prefix, parts[0], suffix].join("")
  const all = parts.slice()
  all[0] = prefix + all[0]!
  all[n - 1] = all[n - 1]! + suffix
  return all.join(",")
}
