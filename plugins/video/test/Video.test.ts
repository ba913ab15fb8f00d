import * as path from "node:path"
import { NodeContext } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { Video } from "../src/index.js"
import { type Clips, makeClips, removeClips } from "./fixtures.js"

let clips: Clips
beforeAll(() => {
  clips = makeClips()
})
afterAll(() => removeClips(clips))

const near = (a: number, b: number, tolerance = 0.05) => Math.abs(a - b) <= tolerance

const increasing = (times: ReadonlyArray<number>) => times.every((t, i) => i === 0 || t > times[i - 1]!)

const isJpeg = (bytes: Uint8Array) => bytes[0] === 0xff && bytes[1] === 0xd8 && bytes.at(-2) === 0xff

/** The error of a failing effect (fails the test when it succeeds). */
const failure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.either(effect), (r) =>
    Either.isLeft(r) ? Effect.succeed(r.left) : Effect.dieMessage("expected a failure")
  )

describe("Video.probe", () => {
  it.effect("reads the metadata of an MP4 (ffprobe numbers given as strings included)", () =>
    Effect.gen(function* () {
      const m = yield* Video.probe(clips.scenes)
      expect(m).toMatchObject({
        file: clips.scenes,
        container: "mov,mp4,m4a,3gp,3g2,mj2",
        width: 640,
        height: 360,
        fps: 25,
        codec: "h264",
        hasAudio: true,
        audioCodec: "aac",
        frameCount: 150,
        rotation: 0,
        videoStream: 0
      })
      expect(m.durationSeconds).toBeCloseTo(6, 1)
      expect(m.sizeBytes).toBeGreaterThan(10_000)
      expect(m.bitRate).toBeGreaterThan(0)
      expect(Video.describe(m)).toMatch(/^00:06\.0\d\d, 640x360, 25 fps, h264, audio aac, \d+\.\d KB$/)
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("WebM, rotated MOV, and a WebM without a duration in its header", () =>
    Effect.gen(function* () {
      const webm = yield* Video.probe(clips.webm)
      expect(webm).toMatchObject({ codec: "vp8", audioCodec: "opus", width: 320, height: 180, fps: 10 })
      expect(webm.container).toContain("webm")
      const mov = yield* Video.probe(clips.mov)
      expect(mov).toMatchObject({ width: 360, height: 640, rotation: 90 })
      const piped = yield* Video.probe(clips.pipeWebm)
      expect(piped.hasAudio).toBe(false)
      expect(piped.durationSeconds).toBeGreaterThan(5.5)
      expect(piped.durationSeconds).toBeLessThan(6.5)
    }).pipe(Effect.provide(NodeContext.layer))
  )
})

describe("Video.keyframes", () => {
  it.effect("frames at the scene changes (0, 2, 4 s), bounded, increasing, JPEG at most 512 px wide", () =>
    Effect.gen(function* () {
      const k = yield* Video.keyframes(clips.scenes)
      const times = k.frames.map((f) => f.time)
      expect(k.sceneChanges).toBe(2)
      expect(k.frames.length).toBeGreaterThanOrEqual(4) // default minFrames = ceil(8 / 2)
      expect(k.frames.length).toBeLessThanOrEqual(8)
      expect(increasing(times)).toBe(true)
      const scenes = k.frames.filter((f) => f.source === "scene")
      expect(scenes.map((f) => f.timestamp)).toEqual(["00:00.000", "00:02.000", "00:04.000"])
      expect(scenes[1]!.sceneScore).toBeGreaterThan(0.3)
      for (const f of k.frames) {
        expect(isJpeg(f.jpeg)).toBe(true)
        expect([f.width, f.height]).toEqual([512, 288])
        expect(f.timestamp).toBe(Video.formatTimestamp(f.time))
      }
      expect(k.metadata.width).toBe(640)
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("only scene frames when minFrames allows it; first frame kept with maxFrames 1", () =>
    Effect.gen(function* () {
      const k = yield* Video.keyframes(clips.scenes, { minFrames: 0, width: 320, quality: 10 })
      expect(k.frames.map((f) => [f.timestamp, f.source])).toEqual([
        ["00:00.000", "scene"],
        ["00:02.000", "scene"],
        ["00:04.000", "scene"]
      ])
      expect(k.frames.every((f) => f.width === 320 && f.height === 180)).toBe(true)
      const one = yield* Video.keyframes(clips.scenes, { maxFrames: 1 })
      expect(one.frames.map((f) => f.timestamp)).toEqual(["00:00.000"])
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("no scene change: evenly spaced fallback frames", () =>
    Effect.gen(function* () {
      const k = yield* Video.keyframes(clips.still, { maxFrames: 8, minFrames: 4 })
      expect(k.sceneChanges).toBe(0)
      expect(k.frames.map((f) => f.source)).toEqual(["scene", "even", "even", "even"])
      expect(k.frames.map((f) => f.time)).toEqual([0, 2, 4, 6])
      // not scaled up: the clip is 320 px wide
      expect(k.frames.every((f) => f.width === 320 && f.height === 240 && isJpeg(f.jpeg))).toBe(true)
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("more cuts than maxFrames: the strongest, well apart, first frame kept", () =>
    Effect.gen(function* () {
      const k = yield* Video.keyframes(clips.many, { maxFrames: 4 })
      expect(k.sceneChanges).toBeGreaterThan(4)
      expect(k.frames.length).toBe(4)
      const times = k.frames.map((f) => f.time)
      expect(times[0]).toBe(0)
      expect(increasing(times)).toBe(true)
      const gaps = times.slice(1).map((t, i) => t - times[i]!)
      expect(Math.min(...gaps)).toBeGreaterThanOrEqual(k.metadata.durationSeconds / 8 - 0.05)
      expect(k.frames.every((f) => f.source === "scene")).toBe(true)
      // bounded by the default too
      const all = yield* Video.keyframes(clips.many)
      expect(all.frames.length).toBe(8)
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("WebM frames at the cuts (within one frame at 10 fps)", () =>
    Effect.gen(function* () {
      const k = yield* Video.keyframes(clips.webm, { minFrames: 0 })
      const times = k.frames.map((f) => f.time)
      expect(
        times.every((t, i) => near(t, [0, 2, 4][i]!, 0.15)),
        `frame times ${times.join(", ")}`
      ).toBe(true)
      expect(k.frames).toHaveLength(3)
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("the same file gives byte-identical frames twice", () =>
    Effect.gen(function* () {
      const a = yield* Video.keyframes(clips.scenes)
      const b = yield* Video.keyframes(clips.scenes)
      expect(b.frames).toEqual(a.frames)
    }).pipe(Effect.provide(NodeContext.layer))
  )
})

describe("bad inputs", () => {
  it.effect("missing ffprobe / ffmpeg at a configured path: one message saying how to install", () =>
    Effect.gen(function* () {
      const e = yield* failure(Video.probe(clips.scenes, { ffprobePath: "/nonexistent/bin/ffprobe" }))
      expect(e._tag).toBe("FfmpegNotFound")
      expect(e.message).toContain("/nonexistent/bin/ffprobe")
      expect(e.message).toContain("apt-get install ffmpeg")
      expect(e.message).toContain("brew install ffmpeg")
      expect(e.message).toContain("ffprobePath")
      const f = yield* failure(Video.keyframes(clips.scenes, { ffmpegPath: "/nonexistent/bin/ffmpeg" }))
      expect(f).toMatchObject({ _tag: "FfmpegNotFound", binary: "ffmpeg", source: "option ffmpegPath" })
      const check = yield* failure(Video.checkBinaries({ ffmpegPath: "/nonexistent/ffmpeg" }))
      expect(check._tag).toBe("FfmpegNotFound")
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("with no ffmpeg on PATH, the builds shipped in the npm packages run", () =>
    Effect.gen(function* () {
      const saved = process.env.PATH
      process.env.PATH = path.join(clips.dir, "empty-bin")
      const bins = yield* Effect.ensuring(
        Video.binaries(),
        Effect.sync(() => {
          process.env.PATH = saved
        })
      )
      expect(bins.ffmpeg.source).toMatch(/^npm @ffmpeg-installer\/ffmpeg/)
      expect(bins.ffprobe.source).toMatch(/^npm @ffprobe-installer\/ffprobe/)
      // both are runnable as they are: the checks and a real probe go through them
      const versions = yield* Video.checkBinaries({ ffmpegPath: bins.ffmpeg.path, ffprobePath: bins.ffprobe.path })
      expect(versions.ffmpeg).toMatch(/^ffmpeg version/)
      expect(versions.ffprobe).toMatch(/^ffprobe version/)
      const meta = yield* Video.probe(clips.scenes, { ffprobePath: bins.ffprobe.path })
      expect(meta.width).toBe(640)
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("MUSE_FFPROBE is honoured", () =>
    Effect.gen(function* () {
      const e = yield* failure(Video.probe(clips.scenes))
      expect(e).toMatchObject({ _tag: "FfmpegNotFound", path: "/opt/none/ffprobe", source: "env MUSE_FFPROBE" })
    }).pipe(
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["MUSE_FFPROBE", "/opt/none/ffprobe"]]))),
      Effect.provide(NodeContext.layer)
    )
  )

  it.effect("each bad file has its own typed error and message", () =>
    Effect.gen(function* () {
      const cases = [
        [`${clips.dir}/missing.mp4`, "VideoNotFound", /missing\.mp4 does not exist/],
        [clips.dir, "VideoNotFound", /is a directory/],
        [clips.empty, "VideoEmpty", /is empty \(0 bytes\)/],
        [clips.truncated, "VideoCorrupt", /damaged.*the file is cut off/],
        [clips.text, "NotAVideo", /is not a video: it contains plain text/],
        [clips.audio, "NotAVideo", /is not a video: it has only audio \(aac\) and no video stream/]
      ] as const
      for (const [file, tag, message] of cases) {
        const fromProbe = yield* failure(Video.probe(file))
        expect([file, fromProbe._tag]).toEqual([file, tag])
        expect(fromProbe.message).toMatch(message)
        const fromFrames = yield* failure(Video.keyframes(file))
        expect(fromFrames._tag).toBe(tag)
      }
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("a cut-off WebM is reported as cut off, whatever the ffmpeg build", () =>
    Effect.gen(function* () {
      const e = yield* failure(Video.keyframes(clips.truncatedWebm))
      expect(e._tag).toBe("VideoCorrupt")
      expect(e.message).toMatch(/Segment at byte \d+ needs \d+ bytes but the file ends after \d+: the file is cut off/)
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.effect("over the size cap", () =>
    Effect.gen(function* () {
      const e = yield* failure(Video.keyframes(clips.scenes, { maxBytes: 50_000 }))
      expect(e).toMatchObject({ _tag: "VideoTooLarge", maxBytes: 50_000 })
      expect(e.message).toMatch(/is \d+\.\d KB, over the 48\.8 KB limit \(maxBytes\)/)
    }).pipe(Effect.provide(NodeContext.layer))
  )

  it.live("a timeout stops ffmpeg with a typed error", () =>
    Effect.gen(function* () {
      const e = yield* failure(Video.keyframes(clips.scenes, { timeout: "1 millis" }))
      expect(e._tag).toBe("VideoTimeout")
      expect(e.message).toContain("took longer than 0.001 s")
    }).pipe(Effect.provide(NodeContext.layer))
  )
})

describe("formatting", () => {
  it("timestamps and sizes", () => {
    expect(Video.formatTimestamp(0)).toBe("00:00.000")
    expect(Video.formatTimestamp(2)).toBe("00:02.000")
    expect(Video.formatTimestamp(61.2345)).toBe("01:01.235")
    expect(Video.formatTimestamp(3723.5)).toBe("1:02:03.500")
    expect(Video.formatBytes(512)).toBe("512 B")
    expect(Video.formatBytes(1536)).toBe("1.5 KB")
    expect(Video.formatBytes(3 * 1024 ** 3)).toBe("3.0 GB")
    expect(Video.mediaTypeOf("a/B.MOV")).toBe("video/quicktime")
    expect(Video.mediaTypeOf("x.webm")).toBe("video/webm")
    expect(Video.mediaTypeOf("x.mkv")).toBeUndefined()
  })
})
