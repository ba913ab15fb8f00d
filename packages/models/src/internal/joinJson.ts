/**
 * A request body's JSON text assembled from pieces, sent as UTF-8 bytes.
 *
 * A session sends its whole history again with every request, and the history's messages are the
 * same (immutable) objects each time: each codec keeps every message's JSON text, so the same string
 * objects come again, in the same order, as the pieces of the next request. `bytesOf` copies the bytes
 * of that shared start from the body it sent before, in one piece, and encodes only what is new —
 * not a join of the whole history's text (a copy), then a scan for its byte length and an encoding
 * on the way out (two more passes over it).
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

/** A body sent, kept for the next request that starts as it did. */
interface Sent {
  readonly pieces: ReadonlyArray<string>
  readonly bytes: Buffer
  /** Where each piece's bytes end. */
  readonly ends: ReadonlyArray<number>
}

/** The bodies of the last few requests (a crew's agents take turns), the latest first. */
const recent: Array<Sent> = []
const RECENT = 8
/** Most bytes the kept bodies hold together (the oldest go first); a body larger than that is not kept. */
const KEPT_BYTES = 16 * 1024 * 1024
let kept = 0

/**
 * The pieces' UTF-8 bytes, in one buffer. A session's request starts with what its previous one
 * sent (the same history: the same string objects): those bytes are copied from that body in one
 * piece, and only what follows is encoded. The array is kept (with the bytes, 16 MiB of bodies at
 * most for the whole process): it must not change afterwards.
 */
export const bytesOf = (pieces: ReadonlyArray<string>): Uint8Array => {
  const n = pieces.length
  let from: Sent | undefined
  let shared = 0
  for (const sent of recent) {
    // (not its last piece: the end of a body, a field or two after its history, seldom the same)
    const most = Math.min(sent.pieces.length - 1, n)
    // one that shares more than the best so far shares the piece where that one stopped
    if (most <= shared || (shared > 0 && sent.pieces[shared] !== pieces[shared])) continue
    let i = 0
    while (i < most && sent.pieces[i] === pieces[i]) i++
    if (i > shared) {
      shared = i
      from = sent
    }
  }
  const head = from === undefined || shared === 0 ? 0 : from.ends[shared - 1]!
  let total = head
  for (let i = shared; i < n; i++) total += Buffer.byteLength(pieces[i]!, "utf8")
  const out = Buffer.allocUnsafe(total)
  if (from !== undefined && shared > 0) from.bytes.copy(out, 0, 0, head)
  const ends = from === undefined ? [] : from.ends.slice(0, shared)
  let at = head
  for (let i = shared; i < n; i++) {
    at += out.write(pieces[i]!, at, "utf8")
    ends.push(at)
  }
  if (total <= KEPT_BYTES) {
    // the body this one extends has nothing this one has not: this one takes its place
    if (from !== undefined && shared >= from.pieces.length - 1) {
      recent.splice(recent.indexOf(from), 1)
      kept -= from.bytes.length
    }
    recent.unshift({ pieces, bytes: out, ends })
    kept += total
    while (recent.length > RECENT || kept > KEPT_BYTES) kept -= recent.pop()!.bytes.length
  }
  return out
}
