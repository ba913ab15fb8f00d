/**
 * Video files (MP4, MOV, WebM) through the ffmpeg and ffprobe found on the machine: `probe` reads
 * the metadata, `keyframes` returns a bounded set of JPEG frames at scene changes (with evenly
 * spaced frames added when a clip has too few cuts), each with its timestamp.
 *
 * Binaries are looked up in this order: the `ffmpegPath` / `ffprobePath` options, the
 * `MUSE_FFMPEG` / `MUSE_FFPROBE` environment variables, `PATH`, then the builds that ship inside
 * the npm packages `@ffmpeg-installer/ffmpeg` and `@ffprobe-installer/ffprobe` (dependencies of
 * this plugin). Every failure is a typed error with a message meant for the person at the
 * terminal (see `VideoError`).
 *
 * @example
 * ```ts
 * import { NodeContext } from "@effect/platform-node"
 * import { Video } from "@musekit/plugin-video"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const { metadata, frames } = yield* Video.keyframes("demo.mp4", { maxFrames: 6 })
 *   console.log(Video.describe(metadata)) // "00:06.000, 640x360, 25 fps, h264, audio aac, 97.6 KB"
 *   for (const frame of frames) console.log(frame.timestamp, frame.source, frame.jpeg.length)
 * }).pipe(Effect.provide(NodeContext.layer))
 * ```
 */
import * as NodePath from "node:path"
import type { CommandExecutor } from "@effect/platform"
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Config, Duration, Effect, Option, Schema } from "effect"
import { bundled, findOnPath } from "./internal/bundled.js"
import * as Container from "./internal/container.js"
import { decodeProbeOutput, finite, type ProbeStream } from "./internal/ffprobe.js"
import { jpegSize } from "./internal/jpeg.js"
import { CONTAINER_DAMAGE, emptySceneLog, sceneLogReader, stripPrefixes } from "./internal/log.js"
import * as Proc from "./internal/process.js"
import { type Candidate, fillTimes, pickScenes } from "./internal/select.js"

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** How to get the binaries; part of the message when they are missing. */
export const INSTALL_HINT =
  "Video input needs ffmpeg and ffprobe (ffprobe ships with ffmpeg). Install them with `apt-get install ffmpeg` " +
  "(Debian/Ubuntu), `brew install ffmpeg` (macOS) or `winget install ffmpeg` (Windows), or point MuseKit at " +
  "existing binaries with the `ffmpegPath` / `ffprobePath` options or the MUSE_FFMPEG / MUSE_FFPROBE " +
  "environment variables. Without them, the builds in the npm packages @ffmpeg-installer/ffmpeg and " +
  "@ffprobe-installer/ffprobe are used when installed."

/** ffmpeg or ffprobe could not be started. */
export class FfmpegNotFound extends Schema.TaggedError<FfmpegNotFound>("@musekit/plugin-video/FfmpegNotFound")(
  "FfmpegNotFound",
  {
    binary: Schema.Literal("ffmpeg", "ffprobe"),
    path: Schema.String,
    /** Where the path came from: `PATH`, `option ffprobePath`, `env MUSE_FFPROBE`, … */
    source: Schema.String,
    reason: Schema.String
  }
) {
  override get message() {
    const where =
      this.source === "PATH"
        ? `${this.binary} was not found on PATH`
        : `${this.binary} could not be run from ${this.path} (set by ${this.source}): ${this.reason}`
    return `${where}. ${INSTALL_HINT}`
  }
}

/** The file does not exist or cannot be opened. */
export class VideoNotFound extends Schema.TaggedError<VideoNotFound>("@musekit/plugin-video/VideoNotFound")(
  "VideoNotFound",
  { file: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `video ${this.file} ${this.reason}`
  }
}

/** The file has zero bytes. */
export class VideoEmpty extends Schema.TaggedError<VideoEmpty>("@musekit/plugin-video/VideoEmpty")("VideoEmpty", {
  file: Schema.String
}) {
  override get message() {
    return `video ${this.file} is empty (0 bytes); it may still be downloading or being written`
  }
}

/** The file is larger than the configured cap (`maxBytes`). */
export class VideoTooLarge extends Schema.TaggedError<VideoTooLarge>("@musekit/plugin-video/VideoTooLarge")(
  "VideoTooLarge",
  { file: Schema.String, sizeBytes: Schema.Number, maxBytes: Schema.Number }
) {
  override get message() {
    return `video ${this.file} is ${formatBytes(this.sizeBytes)}, over the ${formatBytes(this.maxBytes)} limit (maxBytes); cut it first (e.g. \`ffmpeg -i in.mp4 -t 120 -c copy part.mp4\`) or raise maxBytes`
  }
}

/** The file is not a video at all: text, an image, audio only, an unknown format. */
export class NotAVideo extends Schema.TaggedError<NotAVideo>("@musekit/plugin-video/NotAVideo")("NotAVideo", {
  file: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.file} is not a video: ${this.reason}`
  }
}

/** The file is a video container but damaged or cut off. */
export class VideoCorrupt extends Schema.TaggedError<VideoCorrupt>("@musekit/plugin-video/VideoCorrupt")(
  "VideoCorrupt",
  { file: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `video ${this.file} is damaged and cannot be read: ${this.reason}`
  }
}

/** Probing or frame extraction took longer than `timeout`; ffmpeg was stopped. */
export class VideoTimeout extends Schema.TaggedError<VideoTimeout>("@musekit/plugin-video/VideoTimeout")(
  "VideoTimeout",
  { file: Schema.String, seconds: Schema.Number }
) {
  override get message() {
    return `reading video ${this.file} took longer than ${this.seconds} s and was stopped; raise the timeout option or use a shorter clip`
  }
}

/** ffmpeg failed for a reason that is not the file's (a full disk, a crash). */
export class FfmpegFailed extends Schema.TaggedError<FfmpegFailed>("@musekit/plugin-video/FfmpegFailed")(
  "FfmpegFailed",
  { binary: Schema.Literal("ffmpeg", "ffprobe"), file: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `${this.binary} failed on ${this.file}: ${this.reason}`
  }
}

export type VideoError =
  | FfmpegNotFound
  | VideoNotFound
  | VideoEmpty
  | VideoTooLarge
  | NotAVideo
  | VideoCorrupt
  | VideoTimeout
  | FfmpegFailed

// ---------------------------------------------------------------------------------------------
// Options and results
// ---------------------------------------------------------------------------------------------

export interface BinaryOptions {
  /** Path of the ffmpeg binary (default: MUSE_FFMPEG, then `ffmpeg` on PATH, then the npm build). */
  readonly ffmpegPath?: string | undefined
  /**
   * Path of ffprobe (default: MUSE_FFPROBE, then `ffprobe` next to a configured ffmpeg, then PATH,
   * then the npm build).
   */
  readonly ffprobePath?: string | undefined
}

export interface ProbeOptions extends BinaryOptions {
  /** Largest file accepted, in bytes (default 2 GiB). */
  readonly maxBytes?: number | undefined
  /** Longest time one probe or one extraction may take (default 10 minutes). */
  readonly timeout?: Duration.DurationInput | undefined
}

export interface KeyframeOptions extends ProbeOptions {
  /** Most frames returned (default 8). */
  readonly maxFrames?: number | undefined
  /** Fewest frames returned; evenly spaced frames fill up (default half of maxFrames, rounded up). */
  readonly minFrames?: number | undefined
  /** Scene-change score (0..1) above which a frame starts a new scene (default 0.1; 0.3 misses real cuts). */
  readonly sceneThreshold?: number | undefined
  /** Largest frame width in pixels; smaller videos are not scaled up (default 512). */
  readonly width?: number | undefined
  /** JPEG quality on ffmpeg's `-q:v` scale, 2 (best) to 31 (smallest) (default 4). */
  readonly quality?: number | undefined
}

export const defaults = {
  maxBytes: 2 * 1024 ** 3,
  timeout: Duration.minutes(10),
  maxFrames: 8,
  sceneThreshold: 0.1,
  width: 512,
  quality: 4
} as const

export interface Metadata {
  /** The path as given. */
  readonly file: string
  readonly sizeBytes: number
  /** ffprobe's container name, e.g. `mov,mp4,m4a,3gp,3g2,mj2` or `matroska,webm`. */
  readonly container: string
  readonly durationSeconds: number
  /** Start time of the video stream (usually 0); frame times are relative to it. */
  readonly startSeconds: number
  /** Display width and height (rotation applied). */
  readonly width: number
  readonly height: number
  /** Average frame rate, or null when the container does not say. */
  readonly fps: number | null
  /** Video codec, e.g. `h264`, `hevc`, `vp9`. */
  readonly codec: string
  /**
   * Rotation in degrees (0, 90, 180, 270) as ffprobe reports it (display matrix, else the `rotate`
   * tag). Frames come out upright and `width`/`height` are the upright size.
   */
  readonly rotation: number
  readonly bitRate: number | null
  readonly frameCount: number | null
  readonly hasAudio: boolean
  readonly audioCodec: string | null
  /** Index of the video stream in the container. */
  readonly videoStream: number
}

export interface Frame {
  /** Seconds from the start of the video. */
  readonly time: number
  /** `mm:ss.mmm` (or `h:mm:ss.mmm`), e.g. `00:02.000`. */
  readonly timestamp: string
  /** `scene`: a scene change (or the first frame); `even`: an evenly spaced fallback frame. */
  readonly source: "scene" | "even"
  /** Scene-change score 0..1 for scene frames, null for evenly spaced ones. */
  readonly sceneScore: number | null
  readonly width: number
  readonly height: number
  /** The JPEG file. */
  readonly jpeg: Uint8Array
}

export interface Keyframes {
  readonly metadata: Metadata
  /** In time order, strictly increasing, between `minFrames` and `maxFrames` of them when possible. */
  readonly frames: ReadonlyArray<Frame>
  /** Scene changes ffmpeg found (the first frame not counted), before bounding to maxFrames. */
  readonly sceneChanges: number
}

// ---------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------

/** `2` → `00:02.000`; `3723.5` → `1:02:03.500`. */
export const formatTimestamp = (seconds: number): string => {
  const ms = Math.max(0, Math.round(seconds * 1000))
  const h = Math.floor(ms / 3_600_000)
  const m = Math.floor((ms % 3_600_000) / 60_000)
  const s = Math.floor((ms % 60_000) / 1000)
  const rest = `${String(s).padStart(2, "0")}.${String(ms % 1000).padStart(3, "0")}`
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${rest}` : `${String(m).padStart(2, "0")}:${rest}`
}

/** `1536` → `1.5 KB` (powers of 1024). */
export const formatBytes = (n: number): string => {
  if (n < 1024) return `${n} B`
  const units = ["KB", "MB", "GB", "TB"]
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v.toFixed(1)} ${units[i]}`
}

const formatFps = (fps: number) => String(Math.round(fps * 100) / 100)

/** One line for people and models: duration, size in pixels, frame rate, codecs, file size. */
export const describe = (m: Metadata): string =>
  [
    formatTimestamp(m.durationSeconds),
    `${m.width}x${m.height}`,
    ...(m.fps !== null ? [`${formatFps(m.fps)} fps`] : []),
    m.codec,
    m.hasAudio ? `audio ${m.audioCodec ?? "unknown"}` : "no audio",
    formatBytes(m.sizeBytes)
  ].join(", ")

const MEDIA_TYPES: Record<string, string> = {
  mp4: "video/mp4",
  m4v: "video/mp4",
  mov: "video/quicktime",
  webm: "video/webm"
}

/** The media type for a path by its extension (`.mp4`, `.m4v`, `.mov`, `.webm`), or undefined. */
export const mediaTypeOf = (path: string): string | undefined => {
  const m = /\.([a-z0-9]+)$/i.exec(path)
  return m ? MEDIA_TYPES[m[1]!.toLowerCase()] : undefined
}

/** Media types handled as video. */
export const mediaTypes: ReadonlyArray<string> = ["video/mp4", "video/quicktime", "video/webm"]

// ---------------------------------------------------------------------------------------------
// Binaries
// ---------------------------------------------------------------------------------------------

export interface Binary {
  readonly name: "ffmpeg" | "ffprobe"
  readonly path: string
  /** `PATH`, `option ffmpegPath`, `env MUSE_FFMPEG`, `next to ffmpeg`, `npm @ffmpeg-installer/ffmpeg …`. */
  readonly source: string
}

const envPath = (name: string) =>
  Config.option(Config.nonEmptyString(name)).pipe(
    Effect.map(Option.getOrUndefined),
    Effect.orElseSucceed(() => undefined)
  )

/** ffmpeg 5.1 renamed `-vsync` to `-fps_mode`; binaries found to predate it. */
const oldSyncOption = new Set<string>()
const fpsMode = ["-fps_mode", "vfr"] as const
const vsync = ["-vsync", "vfr"] as const

/** `name` on PATH, else the npm build, else plain `name` (which then fails to start, with the install hint). */
const fromMachine = (name: "ffmpeg" | "ffprobe"): Binary => {
  const onPath = findOnPath(name)
  if (onPath) return { name, path: onPath, source: "PATH" }
  const npm = bundled(name)
  return npm ? { name, path: npm.path, source: npm.source } : { name, path: name, source: "PATH" }
}

/** Which ffmpeg and ffprobe will run (nothing is started). */
export const binaries = (
  options: BinaryOptions = {}
): Effect.Effect<{ readonly ffmpeg: Binary; readonly ffprobe: Binary }, never, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const envFfmpeg = yield* envPath("MUSE_FFMPEG")
    const envFfprobe = yield* envPath("MUSE_FFPROBE")
    const configured: Binary | undefined = options.ffmpegPath
      ? { name: "ffmpeg", path: options.ffmpegPath, source: "option ffmpegPath" }
      : envFfmpeg
        ? { name: "ffmpeg", path: envFfmpeg, source: "env MUSE_FFMPEG" }
        : undefined
    const ffmpeg = configured ?? fromMachine("ffmpeg")
    if (options.ffprobePath) {
      return { ffmpeg, ffprobe: { name: "ffprobe", path: options.ffprobePath, source: "option ffprobePath" } }
    }
    if (envFfprobe) return { ffmpeg, ffprobe: { name: "ffprobe", path: envFfprobe, source: "env MUSE_FFPROBE" } }
    const base = NodePath.basename(ffmpeg.path)
    if (configured && /ffmpeg/i.test(base)) {
      const sibling = NodePath.join(NodePath.dirname(ffmpeg.path), base.replace(/ffmpeg/i, "ffprobe"))
      const fs = yield* FileSystem.FileSystem
      if (yield* fs.exists(sibling).pipe(Effect.orElseSucceed(() => false))) {
        return { ffmpeg, ffprobe: { name: "ffprobe", path: sibling, source: `next to ffmpeg (${ffmpeg.source})` } }
      }
    }
    return { ffmpeg, ffprobe: fromMachine("ffprobe") }
  })

const startFailure = (bin: Binary, file: string) => (e: PlatformError) =>
  e._tag === "SystemError" && (e.reason === "NotFound" || e.reason === "PermissionDenied" || e.reason === "BadResource")
    ? new FfmpegNotFound({
        binary: bin.name,
        path: bin.path,
        source: bin.source,
        reason:
          e.reason === "NotFound"
            ? "no such file"
            : e.reason === "PermissionDenied"
              ? "permission denied (is it an executable file?)"
              : e.message
      })
    : new FfmpegFailed({ binary: bin.name, file, reason: e.message })

const run = (bin: Binary, file: string, args: ReadonlyArray<string>, onStderrLine?: (line: string) => void) =>
  Proc.run(bin.path, args, onStderrLine).pipe(Effect.mapError(startFailure(bin, file)))

/**
 * Check that ffmpeg and ffprobe run; returns their version lines. Fails with `FfmpegNotFound`
 * (whose message says how to install them).
 */
export const checkBinaries = (
  options: BinaryOptions = {}
): Effect.Effect<
  { readonly ffmpeg: string; readonly ffprobe: string },
  FfmpegNotFound | FfmpegFailed,
  FileSystem.FileSystem | CommandExecutor.CommandExecutor
> =>
  Effect.gen(function* () {
    const bins = yield* binaries(options)
    const version = (bin: Binary) =>
      Effect.map(run(bin, "-version", ["-version"]), (o) => o.stdout.split("\n")[0]?.trim() ?? "")
    return { ffprobe: yield* version(bins.ffprobe), ffmpeg: yield* version(bins.ffmpeg) }
  })

// ---------------------------------------------------------------------------------------------
// probe
// ---------------------------------------------------------------------------------------------

const withTimeout =
  (file: string, timeout: Duration.DurationInput | undefined) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | VideoTimeout, R> => {
    const d = Duration.decode(timeout ?? defaults.timeout)
    return Effect.timeoutFail(effect, {
      duration: d,
      onTimeout: () => new VideoTimeout({ file, seconds: Duration.toSeconds(d) })
    })
  }

/** ffmpeg input argument: an absolute path behind `file:` so names like `-x.mp4` or `a:b.mp4` are safe. */
const inputArg = (file: string) => `file:${NodePath.resolve(file)}`

const isAttachedPicture = (s: ProbeStream) => (s.disposition?.attached_pic ?? 0) === 1

const rotationOf = (s: ProbeStream): number => {
  const fromSideData = s.side_data_list?.map((d) => finite(d.rotation)).find((r) => r !== undefined)
  const fromTag = finite(s.tags?.rotate !== undefined ? Number(s.tags.rotate) : undefined)
  const r = Math.round(fromSideData ?? fromTag ?? 0)
  return ((r % 360) + 360) % 360
}

/** Duration from the packets when the container does not state one (e.g. WebM written to a pipe). */
const demuxDuration = (bin: Binary, file: string, stream: number) =>
  Effect.gen(function* () {
    const log = emptySceneLog()
    yield* run(
      bin,
      file,
      [
        "-hide_banner",
        "-nostdin",
        "-nostats",
        "-loglevel",
        "level+info",
        "-i",
        inputArg(file),
        "-map",
        `0:${stream}`,
        "-c",
        "copy",
        "-f",
        "null",
        "-"
      ],
      sceneLogReader(log)
    )
    return log.lastTime ?? 0
  })

/**
 * Read a video's metadata with ffprobe. Checks first that the file exists, is not empty, not over
 * `maxBytes`, not obviously something else (text, an image, a document, audio) and, for MP4/MOV,
 * not cut off.
 */
export const probe = (
  file: string,
  options: ProbeOptions = {}
): Effect.Effect<Metadata, VideoError, FileSystem.FileSystem | CommandExecutor.CommandExecutor> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const bins = yield* binaries(options)
    const info = yield* fs.stat(file).pipe(
      Effect.mapError(
        (e) =>
          new VideoNotFound({
            file,
            reason:
              e._tag === "SystemError" && e.reason === "NotFound"
                ? "does not exist"
                : e._tag === "SystemError" && e.reason === "PermissionDenied"
                  ? "cannot be read (permission denied)"
                  : `cannot be read: ${e.message}`
          })
      )
    )
    if (info.type === "Directory") return yield* new VideoNotFound({ file, reason: "is a directory, not a file" })
    if (info.type !== "File") return yield* new VideoNotFound({ file, reason: "is not a regular file" })
    const sizeBytes = Number(info.size)
    if (sizeBytes === 0) return yield* new VideoEmpty({ file })
    const maxBytes = options.maxBytes ?? defaults.maxBytes
    if (sizeBytes > maxBytes) return yield* new VideoTooLarge({ file, sizeBytes, maxBytes })

    const head = yield* Container.readHead(file).pipe(
      Effect.mapError((e) => new VideoNotFound({ file, reason: `cannot be read: ${e.message}` }))
    )
    const kind = Container.sniff(head)
    if (kind._tag === "other" && kind.notVideo) {
      return yield* new NotAVideo({ file, reason: `it contains ${kind.description}` })
    }
    if (kind._tag === "isobmff") {
      const cut = yield* Container.truncatedBox(file, sizeBytes).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isSome(cut)) return yield* new VideoCorrupt({ file, reason: cut.value })
    }
    if (kind._tag === "ebml") {
      const cut = yield* Container.truncatedEbml(file, sizeBytes).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isSome(cut)) return yield* new VideoCorrupt({ file, reason: cut.value })
    }

    const errors: Array<string> = []
    const outcome = yield* run(
      bins.ffprobe,
      file,
      ["-v", "error", "-print_format", "json", "-show_format", "-show_streams", inputArg(file)],
      (line) => {
        const text = stripPrefixes(line).replace(`${inputArg(file)}: `, "")
        if (text && errors.length < 20) errors.push(text)
      }
    )
    if (outcome.exitCode !== 0) {
      const said = errors.join("; ") || `exit code ${outcome.exitCode}`
      if (kind._tag !== "other") {
        return yield* new VideoCorrupt({
          file,
          reason: /moov atom not found/i.test(said)
            ? "the MP4 index (moov atom) is missing: the file is incomplete (an interrupted recording or copy)"
            : `ffprobe could not read it (${said})`
        })
      }
      return yield* new NotAVideo({
        file,
        reason: `ffprobe does not recognize its format (${kind.description}; ffprobe said: ${said})`
      })
    }
    const out = yield* decodeProbeOutput(outcome.stdout).pipe(
      Effect.mapError(
        (e) => new FfmpegFailed({ binary: "ffprobe", file, reason: `its output could not be read: ${e.message}` })
      )
    )
    const format = out.format.format_name
    if (/(^|,)(image2|tty)(,|$)|_pipe$/.test(format)) {
      return yield* new NotAVideo({ file, reason: `it is a still image or text (${format}), not a video` })
    }
    const video = out.streams.find((s) => s.codec_type === "video" && !isAttachedPicture(s))
    const audio = out.streams.find((s) => s.codec_type === "audio")
    if (!video) {
      return yield* new NotAVideo({
        file,
        reason: audio
          ? `it has only audio (${audio.codec_name ?? "unknown codec"}) and no video stream`
          : "it has no video stream"
      })
    }
    const rotation = rotationOf(video)
    const w = finite(video.width) ?? 0
    const h = finite(video.height) ?? 0
    const swap = rotation % 180 === 90
    const durationSeconds =
      finite(out.format.duration) ??
      finite(video.duration) ??
      (yield* demuxDuration(bins.ffmpeg, file, video.index).pipe(withTimeout(file, options.timeout)))
    return {
      file,
      sizeBytes,
      container: format,
      durationSeconds,
      startSeconds: finite(video.start_time) ?? finite(out.format.start_time) ?? 0,
      width: swap ? h : w,
      height: swap ? w : h,
      fps: finite(video.avg_frame_rate) ?? finite(video.r_frame_rate) ?? null,
      codec: video.codec_name ?? "unknown",
      rotation,
      bitRate: finite(out.format.bit_rate) ?? null,
      frameCount: finite(video.nb_frames) ?? null,
      hasAudio: audio !== undefined,
      audioCodec: audio?.codec_name ?? null,
      videoStream: video.index
    } satisfies Metadata
  }).pipe(withTimeout(file, options.timeout))

// ---------------------------------------------------------------------------------------------
// keyframes
// ---------------------------------------------------------------------------------------------

const clamp = (n: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, n))

const resolveFrameOptions = (o: KeyframeOptions) => {
  const maxFrames = clamp(Math.floor(o.maxFrames ?? defaults.maxFrames), 1, 1000)
  return {
    maxFrames,
    minFrames: clamp(Math.floor(o.minFrames ?? Math.ceil(maxFrames / 2)), 0, maxFrames),
    threshold: clamp(o.sceneThreshold ?? defaults.sceneThreshold, 0.001, 1),
    width: clamp(Math.floor(o.width ?? defaults.width), 16, 8192),
    quality: clamp(Math.round(o.quality ?? defaults.quality), 2, 31)
  }
}

const OUTPUT_PROBLEM = /No space left|Permission denied|Read-only file system|Could not open file|Error opening output/i

/**
 * Frames at scene changes, bounded: the first frame and every frame whose scene score is above
 * `sceneThreshold`; when there are more than `maxFrames`, the strongest cuts that are well apart
 * are kept; when there are fewer than `minFrames`, evenly spaced frames are added. Frames are
 * written to a temporary directory that is removed before this returns.
 */
export const keyframes = (
  file: string,
  options: KeyframeOptions = {}
): Effect.Effect<Keyframes, VideoError, FileSystem.FileSystem | CommandExecutor.CommandExecutor> =>
  Effect.scoped(
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const o = resolveFrameOptions(options)
      const bins = yield* binaries(options)
      const metadata = yield* probe(file, options)
      const dir = yield* fs
        .makeTempDirectoryScoped({ prefix: "musekit-video-" })
        .pipe(
          Effect.mapError(
            (e) => new FfmpegFailed({ binary: "ffmpeg", file, reason: `no temporary directory: ${e.message}` })
          )
        )
      const scale = `scale=w='min(${o.width}\\,iw)':h=-2`
      const encode = ["-q:v", String(o.quality), "-fflags", "+bitexact", "-flags:v", "+bitexact"]
      const common = ["-hide_banner", "-nostdin", "-nostats", "-loglevel", "level+info", "-y"]
      const stream = ["-map", `0:${metadata.videoStream}`, "-an", "-sn", "-dn"]

      // 1. one decode: scene frames, their times (showinfo) and scores (metadata=print)
      const sceneArgs = (sync: ReadonlyArray<string>) => [
        ...common,
        "-i",
        inputArg(file),
        ...stream,
        "-vf",
        `select='eq(n\\,0)+gt(scene\\,${o.threshold.toFixed(4)})',metadata=print:key=lavfi.scene_score,showinfo,${scale}`,
        ...sync,
        ...encode,
        NodePath.join(dir, "scene_%06d.jpg")
      ]
      let log = emptySceneLog()
      const oldBuild = oldSyncOption.has(bins.ffmpeg.path)
      let scene = yield* run(bins.ffmpeg, file, sceneArgs(oldBuild ? vsync : fpsMode), sceneLogReader(log))
      if (!oldBuild && scene.exitCode !== 0 && log.errors.some((l) => /Unrecognized option 'fps_mode'/.test(l))) {
        // builds before ffmpeg 5.1 (e.g. the npm one) know only the older spelling
        oldSyncOption.add(bins.ffmpeg.path)
        log = emptySceneLog()
        scene = yield* run(bins.ffmpeg, file, sceneArgs(vsync), sceneLogReader(log))
      }
      const damage = log.errors.find((l) => CONTAINER_DAMAGE.test(l))
      const outputProblem = log.errors.find((l) => OUTPUT_PROBLEM.test(l))
      if (outputProblem) return yield* new FfmpegFailed({ binary: "ffmpeg", file, reason: outputProblem })
      if (scene.exitCode !== 0 || damage !== undefined) {
        const said = damage ?? log.errors[0] ?? `ffmpeg exited with code ${scene.exitCode}`
        const cut = /partial file|ended prematurely|truncat|end of file/i.test(said)
          ? " — the file is cut off (an interrupted download or copy, or a recording still being written)"
          : ""
        return yield* new VideoCorrupt({ file, reason: `${said}${cut}` })
      }
      const candidates: Array<Candidate> = [...log.times.entries()].map(([n, t]) => ({
        n,
        time: Math.max(0, t - metadata.startSeconds),
        score: log.scores.get(n) ?? 0
      }))
      if (candidates.length === 0) {
        return yield* new VideoCorrupt({ file, reason: log.errors[0] ?? "ffmpeg could not decode a single frame" })
      }
      const picked = pickScenes(candidates, o.maxFrames, metadata.durationSeconds)
      const readJpeg = (path: string) =>
        fs
          .readFile(path)
          .pipe(
            Effect.mapError(
              (e) => new FfmpegFailed({ binary: "ffmpeg", file, reason: `frame ${path} unreadable: ${e.message}` })
            )
          )
      const frames: Array<Omit<Frame, "width" | "height">> = []
      for (const c of picked) {
        const path = NodePath.join(dir, `scene_${String(c.n + 1).padStart(6, "0")}.jpg`)
        if (!(yield* fs.exists(path).pipe(Effect.orElseSucceed(() => false)))) continue
        frames.push({
          time: c.time,
          timestamp: formatTimestamp(c.time),
          source: "scene",
          sceneScore: c.score,
          jpeg: yield* readJpeg(path)
        })
      }

      // 2. too few: evenly spaced frames, each by a seek and a single-frame decode
      const lastStart = Math.max(0, metadata.durationSeconds - 2 / (metadata.fps ?? 25))
      const targets = fillTimes(
        frames.map((f) => f.time),
        o.minFrames,
        metadata.durationSeconds
      ).map((t) => Math.min(t, lastStart))
      const extra = yield* Effect.forEach(
        targets,
        (t, i) =>
          Effect.gen(function* () {
            const one = emptySceneLog()
            const out = NodePath.join(dir, `even_${String(i).padStart(4, "0")}.jpg`)
            const r = yield* run(
              bins.ffmpeg,
              file,
              [
                ...common,
                "-ss",
                t.toFixed(3),
                "-copyts",
                "-i",
                inputArg(file),
                ...stream,
                "-vf",
                `showinfo,${scale}`,
                "-frames:v",
                "1",
                ...encode,
                out
              ],
              sceneLogReader(one)
            )
            const pts = one.times.get(0)
            if (r.exitCode !== 0 || pts === undefined) return undefined
            if (!(yield* fs.exists(out).pipe(Effect.orElseSucceed(() => false)))) return undefined
            const time = Math.max(0, pts - metadata.startSeconds)
            return {
              time,
              timestamp: formatTimestamp(time),
              source: "even" as const,
              sceneScore: null,
              jpeg: yield* readJpeg(out)
            }
          }),
        { concurrency: 2 }
      )
      for (const f of extra) {
        if (f && frames.every((g) => Math.abs(g.time - f.time) > 0.0005)) frames.push(f)
      }
      frames.sort((a, b) => a.time - b.time)
      return {
        metadata,
        frames: frames.map((f) => {
          const size = jpegSize(f.jpeg)
          return { ...f, width: size?.width ?? 0, height: size?.height ?? 0 }
        }),
        sceneChanges: candidates.length - 1
      } satisfies Keyframes
    })
  ).pipe(withTimeout(file, options.timeout))
