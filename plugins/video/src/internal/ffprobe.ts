/**
 * The part of `ffprobe -print_format json -show_format -show_streams` the plugin reads.
 * ffprobe prints many numbers as strings ("6.000000", "48000") and some as "N/A"; frame rates are
 * ratios ("25/1", "30000/1001", "0/0" when unknown). Unknown values decode to NaN.
 */
import { Schema } from "effect"

/** A number given as a number or a string; "N/A" and other non-numbers become NaN. */
export const LooseNumber = Schema.transform(Schema.Union(Schema.Number, Schema.String), Schema.Number, {
  strict: true,
  decode: (v) => (typeof v === "number" ? v : v.trim() === "" ? Number.NaN : Number(v)),
  encode: (n) => n
})

/** "30000/1001" → 29.97; "0/0" → NaN. */
export const Ratio = Schema.transform(Schema.String, Schema.Number, {
  strict: true,
  decode: (s) => {
    const [num, den] = s.split("/")
    const n = Number(num)
    const d = den === undefined ? 1 : Number(den)
    return d === 0 ? Number.NaN : n / d
  },
  encode: (n) => `${n}/1`
})

export const ProbeStream = Schema.Struct({
  index: Schema.Number,
  codec_type: Schema.optional(Schema.String),
  codec_name: Schema.optional(Schema.String),
  profile: Schema.optional(Schema.String),
  width: Schema.optional(LooseNumber),
  height: Schema.optional(LooseNumber),
  pix_fmt: Schema.optional(Schema.String),
  avg_frame_rate: Schema.optional(Ratio),
  r_frame_rate: Schema.optional(Ratio),
  nb_frames: Schema.optional(LooseNumber),
  start_time: Schema.optional(LooseNumber),
  duration: Schema.optional(LooseNumber),
  sample_rate: Schema.optional(LooseNumber),
  channels: Schema.optional(LooseNumber),
  channel_layout: Schema.optional(Schema.String),
  disposition: Schema.optional(Schema.Struct({ attached_pic: Schema.optional(LooseNumber) })),
  tags: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  side_data_list: Schema.optional(Schema.Array(Schema.Struct({ rotation: Schema.optional(LooseNumber) })))
})
export type ProbeStream = typeof ProbeStream.Type

export const ProbeFormat = Schema.Struct({
  format_name: Schema.String,
  duration: Schema.optional(LooseNumber),
  start_time: Schema.optional(LooseNumber),
  size: Schema.optional(LooseNumber),
  bit_rate: Schema.optional(LooseNumber)
})

export const ProbeOutput = Schema.Struct({
  streams: Schema.optionalWith(Schema.Array(ProbeStream), { default: () => [] }),
  format: ProbeFormat
})
export type ProbeOutput = typeof ProbeOutput.Type

export const decodeProbeOutput = Schema.decodeUnknown(Schema.parseJson(ProbeOutput))

/** A finite number or undefined. */
export const finite = (n: number | undefined): number | undefined =>
  n !== undefined && Number.isFinite(n) ? n : undefined
