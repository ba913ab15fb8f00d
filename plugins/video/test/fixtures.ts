/**
 * Real clips made with ffmpeg for the tests (a second or two to make them all):
 *
 * - `scenes`: 6 s, 3 scenes of 2 s (red, testsrc, smptebars), 640x360@25, H.264 + AAC 440 Hz
 * - `still`: 8 s testsrc, 320x240@25, no scene change (scores stay under 0.02), no audio
 * - `many`: 12 colour cuts of 0.5 s (more scene changes than the default maxFrames)
 * - `webm` (`scenes` as 320x180@10 VP8 + Opus), `mov` (rotated 90°), `pipeWebm` (no duration in its header)
 * - bad inputs: `empty`, `truncated` (the first half of `scenes`), `truncatedWebm`, `text`, `audio`
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { bundled, findOnPath } from "../src/internal/bundled.js"

export interface Clips {
  readonly dir: string
  readonly scenes: string
  readonly still: string
  readonly many: string
  readonly webm: string
  readonly pipeWebm: string
  readonly mov: string
  readonly empty: string
  readonly truncated: string
  readonly truncatedWebm: string
  readonly text: string
  readonly audio: string
}

/** The ffmpeg the plugin itself would pick with no configuration: PATH, else the npm build. */
export const ffmpegBinary = findOnPath("ffmpeg") ?? bundled("ffmpeg")?.path ?? "ffmpeg"

const ffmpeg = (args: ReadonlyArray<string>, options: { readonly stdoutTo?: string } = {}) => {
  const out = execFileSync(ffmpegBinary, ["-hide_banner", "-loglevel", "error", "-y", ...args], {
    maxBuffer: 64 * 1024 * 1024
  })
  if (options.stdoutTo) fs.writeFileSync(options.stdoutTo, out)
}

const firstHalf = (from: string, to: string) => {
  const bytes = fs.readFileSync(from)
  fs.writeFileSync(to, bytes.subarray(0, Math.floor(bytes.length / 2)))
}

export const makeClips = (): Clips => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "musekit-video-test-"))
  const p = (name: string) => path.join(dir, name)
  const lavfi = (src: string) => ["-f", "lavfi", "-i", src]
  const x264 = ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p"]

  ffmpeg([
    ...lavfi("color=c=red:s=640x360:r=25:d=2"),
    ...lavfi("testsrc=s=640x360:r=25:d=2"),
    ...lavfi("smptebars=s=640x360:r=25:d=2"),
    ...lavfi("sine=frequency=440:sample_rate=48000:duration=6"),
    "-filter_complex",
    "[0:v][1:v][2:v]concat=n=3:v=1:a=0[v]",
    "-map",
    "[v]",
    "-map",
    "3:a",
    ...x264,
    "-c:a",
    "aac",
    "-b:a",
    "128k",
    "-movflags",
    "+faststart",
    "-shortest",
    p("scenes.mp4")
  ])
  ffmpeg([...lavfi("testsrc=s=320x240:r=25:d=8"), ...x264, p("still.mp4")])
  const colors = [
    "red",
    "green",
    "blue",
    "yellow",
    "white",
    "black",
    "cyan",
    "magenta",
    "orange",
    "purple",
    "gray",
    "pink"
  ]
  ffmpeg([
    ...colors.flatMap((c) => lavfi(`color=c=${c}:s=320x240:r=25:d=0.5`)),
    "-filter_complex",
    `${colors.map((_, i) => `[${i}:v]`).join("")}concat=n=${colors.length}:v=1:a=0[v]`,
    "-map",
    "[v]",
    ...x264,
    p("many.mp4")
  ])
  // VP8 is slow to encode: a small, 10 fps copy keeps this under a second
  const vp8 = [
    "-vf",
    "scale=320:180",
    "-r",
    "10",
    "-c:v",
    "libvpx",
    "-deadline",
    "good",
    "-cpu-used",
    "16",
    "-b:v",
    "300k"
  ]
  ffmpeg(["-i", p("scenes.mp4"), ...vp8, "-c:a", "libopus", p("scenes.webm")])
  ffmpeg(["-i", p("scenes.mp4"), ...vp8, "-an", "-f", "webm", "pipe:1"], { stdoutTo: p("pipe.webm") })
  ffmpeg(["-i", p("scenes.mp4"), "-c", "copy", "-metadata:s:v", "rotate=90", p("rotated.mov")])
  ffmpeg([...lavfi("sine=frequency=440:sample_rate=48000:duration=2"), "-c:a", "aac", p("audio-only.mp4")])
  fs.writeFileSync(p("empty.mp4"), "")
  firstHalf(p("scenes.mp4"), p("truncated.mp4"))
  firstHalf(p("scenes.webm"), p("truncated.webm"))
  fs.writeFileSync(p("notes.mp4"), "These are meeting notes, not a video.\n")

  return {
    dir,
    scenes: p("scenes.mp4"),
    still: p("still.mp4"),
    many: p("many.mp4"),
    webm: p("scenes.webm"),
    pipeWebm: p("pipe.webm"),
    mov: p("rotated.mov"),
    empty: p("empty.mp4"),
    truncated: p("truncated.mp4"),
    truncatedWebm: p("truncated.webm"),
    text: p("notes.mp4"),
    audio: p("audio-only.mp4")
  }
}

export const removeClips = (clips: Clips | undefined) => {
  if (clips) fs.rmSync(clips.dir, { recursive: true, force: true })
}
