/**
 * Cheap checks on the bytes of a file before ffprobe runs: what the first bytes look like, and
 * whether an MP4/MOV file is cut off (a top-level box that claims more bytes than the file has).
 */
import { FileSystem } from "@effect/platform"
import { Effect, Option } from "effect"

export type Kind =
  | { readonly _tag: "isobmff" }
  | { readonly _tag: "ebml" }
  /** `notVideo`: certainly not a video (text, an image, a document, an archive, audio). */
  | { readonly _tag: "other"; readonly description: string; readonly notVideo: boolean }

const ascii = (bytes: Uint8Array, from: number, to: number) => String.fromCharCode(...bytes.subarray(from, to))

const startsWith = (bytes: Uint8Array, sig: ReadonlyArray<number>, at = 0) =>
  bytes.length >= at + sig.length && sig.every((b, i) => bytes[at + i] === b)

const ISO_BOXES = new Set(["ftyp", "moov", "mdat", "free", "wide", "skip", "pnot", "uuid"])

const isText = (bytes: Uint8Array): boolean => {
  if (bytes.length === 0) return false
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, Math.min(bytes.length, 1024)))
  } catch {
    // a multi-byte character cut at the 1024-byte boundary is still text
    if (bytes.length <= 1024) return false
  }
  for (const b of bytes.subarray(0, Math.min(bytes.length, 1024))) {
    if (b < 0x09 || (b > 0x0d && b < 0x20 && b !== 0x1b)) return false
  }
  return true
}

/** What the first bytes of a file (at least 16 when available) say it is. */
export const sniff = (head: Uint8Array): Kind => {
  if (head.length >= 8 && ISO_BOXES.has(ascii(head, 4, 8))) return { _tag: "isobmff" }
  if (startsWith(head, [0x1a, 0x45, 0xdf, 0xa3])) return { _tag: "ebml" }
  const other = (description: string, notVideo = true): Kind => ({ _tag: "other", description, notVideo })
  if (startsWith(head, [0x89, 0x50, 0x4e, 0x47])) return other("a PNG image")
  if (startsWith(head, [0xff, 0xd8, 0xff])) return other("a JPEG image")
  if (ascii(head, 0, 4) === "%PDF") return other("a PDF document")
  if (startsWith(head, [0x50, 0x4b, 0x03, 0x04])) return other("a ZIP archive")
  if (ascii(head, 0, 4) === "RIFF" && ascii(head, 8, 12) === "WAVE") return other("a WAV audio file")
  if (ascii(head, 0, 4) === "OggS") return other("an Ogg file", false)
  if (ascii(head, 0, 3) === "ID3" || startsWith(head, [0xff, 0xfb])) return other("an MP3 audio file")
  if (isText(head)) return other("plain text, not video data")
  return other("binary data of an unknown format", false)
}

/** Read up to `length` bytes at `offset`. */
const readAt = (file: FileSystem.File, offset: number, length: number) =>
  Effect.gen(function* () {
    yield* file.seek(offset, "start")
    const buffer = new Uint8Array(length)
    const n = yield* file.read(buffer)
    return buffer.subarray(0, Number(n))
  })

/** The first `length` bytes of a file. */
export const readHead = (path: string, length = 1024) =>
  Effect.scoped(
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const file = yield* fs.open(path, { flag: "r" })
      return yield* readAt(file, 0, length)
    })
  )

const printable = (type: string) => /^[\x20-\x7e]{4}$/.test(type)

/**
 * Walk the top-level boxes of an ISO BMFF (MP4/MOV) file. Returns a reason when a box runs past
 * the end of the file, i.e. the file was cut off or is still being written. Stops quietly at data
 * that does not look like a box (trailing padding some writers leave) and leaves that to ffprobe.
 */
export const truncatedBox = (path: string, size: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const file = yield* fs.open(path, { flag: "r" })
      let pos = 0
      for (let i = 0; i < 100_000 && pos + 8 <= size; i++) {
        const header = yield* readAt(file, pos, 16)
        if (header.length < 8) break
        const view = new DataView(header.buffer, header.byteOffset, header.byteLength)
        const type = ascii(header, 4, 8)
        if (!printable(type)) break
        let boxSize = view.getUint32(0)
        if (boxSize === 1) {
          if (header.length < 16) return Option.some(`the '${type}' box header at byte ${pos} is cut off`)
          boxSize = Number(view.getBigUint64(8))
        } else if (boxSize === 0) {
          break // extends to the end of the file
        } else if (boxSize < 8) {
          break
        }
        if (pos + boxSize > size) {
          return Option.some(
            `the '${type}' box at byte ${pos} needs ${boxSize} bytes but the file ends after ${size - pos}: the file is cut off (an interrupted download or copy, or a recording still being written)`
          )
        }
        pos += boxSize
      }
      return Option.none<string>()
    })
  )

/** An EBML variable-length integer at `at`: its length in bytes and value (`undefined` = "unknown"). */
const vint = (bytes: Uint8Array, at: number, keepMarker: boolean) => {
  const first = bytes[at]
  if (first === undefined || first === 0) return undefined
  const length = Math.clz32(first) - 23 // 1..8
  if (at + length > bytes.length) return undefined
  let value = keepMarker ? first : first & (0xff >> length)
  let allOnes = value === 0xff >> length
  for (let i = 1; i < length; i++) {
    const b = bytes[at + i]!
    value = value * 256 + b
    if (b !== 0xff) allOnes = false
  }
  return { length, value: !keepMarker && allOnes ? undefined : value }
}

/**
 * Whether a WebM/Matroska file is cut off: its Segment declares a size and the file ends before
 * it. Recent ffmpeg builds say so while decoding; older ones decode the part that is there in
 * silence, so the check is made here for all of them. A Segment of unknown size (a live
 * recording, a pipe) cannot be checked and is left to ffmpeg.
 */
export const truncatedEbml = (path: string, size: number) =>
  Effect.gen(function* () {
    const head = yield* readHead(path, 4096)
    let pos = 0
    const header = vint(head, pos, true)
    if (header?.value !== 0x1a45dfa3) return Option.none<string>()
    const headerSize = vint(head, pos + header.length, false)
    if (!headerSize || headerSize.value === undefined) return Option.none<string>()
    pos += header.length + headerSize.length + headerSize.value
    const id = vint(head, pos, true)
    if (id?.value !== 0x18538067) return Option.none<string>()
    const segment = vint(head, pos + id.length, false)
    if (!segment || segment.value === undefined) return Option.none<string>()
    const end = pos + id.length + segment.length + segment.value
    return end > size
      ? Option.some(
          `the Segment at byte ${pos} needs ${end - pos} bytes but the file ends after ${size - pos}: the file is cut off (an interrupted download or copy, or a recording still being written)`
        )
      : Option.none<string>()
  })
