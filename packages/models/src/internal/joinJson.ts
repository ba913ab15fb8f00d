/**
 * A request body's JSON text assembled from pieces, sent as UTF-8 bytes copied once.
 *
 * A session sends its whole history again with every request, and the history's messages are the
 * same (immutable) objects each time: each codec keeps every message's JSON text, so the same string
 * objects come again. `bytesOf` keeps their UTF-8 bytes too, so a request's body is one copy of
 * bytes already encoded — not a join of the history's text (a copy), then a scan for its byte length
 * and an encoding on the way out (two more passes over it).
 *
 * @example
 * ```ts
 * const pieces = piecesBetween('{"messages":[', ['{"a":1}', '{"b":2}'], "]}")
 * textOf(pieces) // '{"messages":[{"a":1},{"b":2}]}'
 * bytesOf(pieces) // the same, as UTF-8 bytes
 * ```
 */

/** `[prefix, parts[0], ",", parts[1], …, suffix]`: what `prefix + parts.join(",") + suffix` is made of. */
export const piecesBetween = (prefix: string, parts: ReadonlyArray<string>, suffix: string): Array<string> => {
  const out: Array<string> = new Array(parts.length * 2 + 1)
  out[0] = prefix
  let o = 1
  for (let i = 0; i < parts.length; i++) {
    if (i > 0) out[o++] = ","
    out[o++] = parts[i]!
  }
  out[o++] = suffix
  out.length = o
  return out
}

/** The pieces as one flat string, made in one copy. */
export const textOf = (pieces: ReadonlyArray<string>): string => (pieces.length === 1 ? pieces[0]! : pieces.join(""))

/** `prefix + parts.join(",") + suffix`, as one flat string made in one copy. */
export const joinBetween = (prefix: string, parts: ReadonlyArray<string>, suffix: string): string =>
  textOf(piecesBetween(prefix, parts, suffix))

/** Pieces shorter than this are encoded each time (separators, a request's own fields). */
const CACHED_CHARS = 128

/**
 * UTF-8 bytes of the pieces recent requests sent, by the string itself: a piece sent before is the
 * same string object again, found at once (no hash of its text nor comparison of it). Two
 * generations bound what it holds: once the newer holds `GENERATION_BYTES`, it becomes the older and
 * what is not sent again from it is let go.
 */
const GENERATION_BYTES = 16 * 1024 * 1024
let current = new Map<string, Buffer>()
let older = new Map<string, Buffer>()
let currentBytes = 0

const encoded = (piece: string): Buffer => {
  let bytes = current.get(piece)
  if (bytes !== undefined) return bytes
  bytes = older.get(piece) ?? Buffer.from(piece, "utf8")
  if (currentBytes + bytes.length > GENERATION_BYTES) {
    older = current
    current = new Map()
    currentBytes = 0
  }
  current.set(piece, bytes)
  currentBytes += bytes.length
  return bytes
}

/** The pieces' UTF-8 bytes, in one buffer: those of pieces sent before are copied, not encoded again. */
export const bytesOf = (pieces: ReadonlyArray<string>): Uint8Array => {
  const n = pieces.length
  const parts: Array<Buffer | string> = new Array(n)
  let total = 0
  for (let i = 0; i < n; i++) {
    const piece = pieces[i]!
    if (piece.length >= CACHED_CHARS) {
      const bytes = encoded(piece)
      parts[i] = bytes
      total += bytes.length
    } else {
      parts[i] = piece
      total += Buffer.byteLength(piece, "utf8")
    }
  }
  const out = Buffer.allocUnsafe(total)
  let at = 0
  for (let i = 0; i < n; i++) {
    const part = parts[i]!
    at += typeof part === "string" ? out.write(part, at, "utf8") : part.copy(out, at)
  }
  return out
}
