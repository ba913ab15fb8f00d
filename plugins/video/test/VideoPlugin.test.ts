import * as fs from "node:fs"
import * as path from "node:path"
import type { Prompt } from "@effect/ai"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { EventLog, Plugin, Workspace } from "@musekit/core"
import { Effect } from "effect"
import { Video, VideoPlugin } from "../src/index.js"
import { type Clips, makeClips, removeClips } from "./fixtures.js"

let clips: Clips
beforeAll(() => {
  clips = makeClips()
})
afterAll(() => removeClips(clips))

type Part = Prompt.UserMessagePartEncoded

const prompt = (text: string, attachments: ReadonlyArray<Plugin.Attachment> = []): Plugin.PromptInput => ({
  agent: "main",
  content: [{ type: "text", text }],
  attachments
})

/** Run the plugin's hook the way the agent loop does: through `Plugin.layer`'s registry. */
const transform = (input: Plugin.PromptInput, options: VideoPlugin.Options = {}) =>
  Effect.gen(function* () {
    const plugins = yield* Plugin.Plugins
    return yield* plugins.transformPrompt(input)
  }).pipe(Effect.provide(Plugin.layer([VideoPlugin.make(options)])))

const texts = (parts: ReadonlyArray<Part>) => parts.filter((p) => p.type === "text").map((p) => p.text)
const files = (parts: ReadonlyArray<Part>) => parts.filter((p) => p.type === "file")

const sha256 = async (bytes: Uint8Array) =>
  Buffer.from(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>)).toString("hex")

describe("VideoPlugin", () => {
  it("is a plugin named video with a transformPrompt hook", () => {
    const p = VideoPlugin.make()
    expect(p.name).toBe("video")
    expect(typeof p.hooks?.transformPrompt).toBe("function")
  })

  it.effect("an MP4 attachment becomes metadata, then a label and a blob: JPEG per frame", () =>
    Effect.gen(function* () {
      const log = yield* EventLog.EventLog
      const out = yield* transform(
        prompt("What happens in this clip?", [{ path: clips.scenes }, { path: "notes.txt", mediaType: "text/plain" }]),
        { minFrames: 0 }
      )
      expect(out.agent).toBe("main")
      expect(out.attachments).toEqual([{ path: "notes.txt", mediaType: "text/plain" }])
      const [question, meta, ...rest] = out.content
      expect(question).toEqual({ type: "text", text: "What happens in this clip?" })
      expect(meta?.type).toBe("text")
      expect((meta as Prompt.TextPartEncoded).text).toMatch(
        /^Video .*scenes\.mp4 \(00:06\.0\d\d, 640x360, 25 fps, h264, audio aac, .* KB\)\. 3 frames follow.*The audio is not included\.$/
      )
      expect(rest.map((p) => p.type)).toEqual(["text", "file", "text", "file", "text", "file"])
      expect(texts(rest)).toEqual(["[frame at 00:00.000]", "[frame at 00:02.000]", "[frame at 00:04.000]"])
      for (const [i, f] of files(rest).entries()) {
        expect(f).toMatchObject({ type: "file", mediaType: "image/jpeg", fileName: `scenes-frame-0${i + 1}.jpg` })
        expect(f.data).toMatch(/^blob:[0-9a-f]{64}$/)
        const bytes = yield* log.getBlob((f.data as string).slice("blob:".length))
        expect([bytes[0], bytes[1]]).toEqual([0xff, 0xd8])
        expect(yield* Effect.promise(() => sha256(bytes))).toBe((f.data as string).slice(5))
      }
    }).pipe(Effect.provide(EventLog.layerMemory("video-test")))
  )

  it.effect("running the hook twice on the same file gives identical parts (replay is exact)", () =>
    Effect.gen(function* () {
      const input = prompt("look", [{ path: clips.scenes, mediaType: "video/mp4" }])
      const first = yield* transform(input)
      const second = yield* transform(input)
      expect(second).toEqual(first)
      expect(files(first.content).length).toBeGreaterThanOrEqual(4)
    }).pipe(Effect.provide(EventLog.layerMemory("video-replay")))
  )

  it.effect("an @mention in text is expanded right after that text; relative paths use the workspace root", () =>
    Effect.gen(function* () {
      const name = path.basename(clips.still)
      const out = yield* transform({
        agent: "main",
        content: [
          { type: "text", text: `Compare @${name}, and @"${name}" again` },
          { type: "text", text: "thanks" }
        ],
        attachments: [{ path: clips.still }]
      }).pipe(Effect.provide(Workspace.layerLexical(clips.dir)))
      const t = texts(out.content)
      expect(t[0]).toBe(`Compare @${name}, and @"${name}" again`)
      expect(t[1]).toMatch(/^Video still\.mp4 \(00:08\.000, 320x240, 25 fps, h264, no audio, .*\)\. 4 frames follow/)
      expect(t.slice(2, 6)).toEqual([
        "[frame at 00:00.000]",
        "[frame at 00:02.000]",
        "[frame at 00:04.000]",
        "[frame at 00:06.000]"
      ])
      expect(t.at(-1)).toBe("thanks") // the attachment was the same file: not added twice
      expect(out.attachments).toEqual([])
    }).pipe(Effect.provide(EventLog.layerMemory("video-mention")))
  )

  it.effect("bad files become a text part stating the error; the turn goes on", () =>
    Effect.gen(function* () {
      const out = yield* transform(
        prompt("check these", [
          { path: clips.text },
          { path: clips.audio },
          { path: clips.empty },
          { path: clips.truncated },
          { path: `${clips.dir}/gone.mov` },
          { path: clips.scenes }
        ]),
        // under the size of scenes.mp4 (which depends on the ffmpeg build), over the others'
        { maxBytes: Math.floor(fs.statSync(clips.scenes).size * 0.9), minFrames: 0 }
      )
      const t = texts(out.content)
      expect(t.slice(1)).toEqual([
        `[video ${clips.text} was not included: ${clips.text} is not a video: it contains plain text, not video data]`,
        `[video ${clips.audio} was not included: ${clips.audio} is not a video: it has only audio (aac) and no video stream]`,
        `[video ${clips.empty} was not included: video ${clips.empty} is empty (0 bytes); it may still be downloading or being written]`,
        expect.stringMatching(
          /^\[video .*truncated\.mp4 was not included: video .* is damaged and cannot be read: .*cut off/
        ),
        `[video ${clips.dir}/gone.mov was not included: video ${clips.dir}/gone.mov does not exist]`,
        expect.stringMatching(/^\[video .*scenes\.mp4 was not included: video .* over the [\d.]+ KB limit \(maxBytes\)/)
      ])
      expect(files(out.content)).toEqual([])
    }).pipe(Effect.provide(EventLog.layerMemory("video-errors")))
  )

  it.effect("a missing ffmpeg is reported once, with how to install it", () =>
    Effect.gen(function* () {
      const out = yield* transform(prompt("two clips", [{ path: clips.scenes }, { path: clips.still }]), {
        ffprobePath: "/nonexistent/ffprobe"
      })
      const t = texts(out.content)
      expect(t).toHaveLength(3)
      expect(t[1]).toContain("apt-get install ffmpeg")
      expect(t[1]).toContain("brew install ffmpeg")
      expect(t[2]).toBe(`[video ${clips.still} was not included: ffmpeg is not available (see above)]`)
    }).pipe(Effect.provide(EventLog.layerMemory("video-nobin")))
  )

  it.effect("nativeVideo: one video/* part holding the whole file's hash, plus the metadata", () =>
    Effect.gen(function* () {
      const log = yield* EventLog.EventLog
      const out = yield* transform(prompt("describe", [{ path: clips.scenes }, { path: clips.webm }]), {
        nativeVideo: true
      })
      expect(out.content.map((p) => p.type)).toEqual(["text", "text", "file", "text", "file"])
      const [mp4, webm] = files(out.content)
      const whole = new Uint8Array(fs.readFileSync(clips.scenes))
      expect(mp4).toEqual({
        type: "file",
        mediaType: "video/mp4",
        data: `blob:${yield* Effect.promise(() => sha256(whole))}`,
        fileName: "scenes.mp4"
      })
      expect(webm?.mediaType).toBe("video/webm")
      expect(new Uint8Array(yield* log.getBlob((mp4!.data as string).slice(5)))).toEqual(whole)
      expect(texts(out.content)[1]).toMatch(/^Video .*scenes\.mp4 \(00:06.*\)\. The whole video follows\.$/)

      // over maxNativeBytes: frames instead, saying why
      const big = yield* transform(prompt("describe", [{ path: clips.scenes }]), {
        nativeVideo: true,
        maxNativeBytes: 1000
      })
      expect(texts(big.content)[1]).toContain("over the 1000 B limit for sending video as is, so frames are shown")
      expect(files(big.content).every((f) => f.mediaType === "image/jpeg")).toBe(true)
    }).pipe(Effect.provide(EventLog.layerMemory("video-native")))
  )

  it.effect("without video the input is returned as is; without an EventLog frames are inline bytes", () =>
    Effect.gen(function* () {
      const input = prompt("no video here, just @notes.md and mail@host.mp4", [
        { path: "a.png", mediaType: "image/png" }
      ])
      expect(yield* VideoPlugin.transformPrompt()(input)).toBe(input)
      const out = yield* VideoPlugin.transformPrompt({ minFrames: 0 })(prompt("x", [{ path: clips.scenes }]))
      const f = files(out.content)
      expect(f).toHaveLength(3)
      expect(f.every((p) => p.data instanceof Uint8Array)).toBe(true)
    })
  )

  it("mentions: forms that count and forms that do not", () => {
    expect(VideoPlugin.mentionedPaths("see @a.mp4, @b/c.MOV. and (@d.webm) @'e f.mp4' @\"g h.m4v\"")).toEqual([
      "a.mp4",
      "b/c.MOV",
      "d.webm",
      "e f.mp4",
      "g h.m4v"
    ])
    expect(VideoPlugin.mentionedPaths("mail@host.mp4 @notes.md @a.mp4x @a.mp4 @a.mp4")).toEqual(["a.mp4"])
    expect(VideoPlugin.isVideoAttachment({ path: "x.bin", mediaType: "video/webm" })).toBe(true)
    expect(VideoPlugin.isVideoAttachment({ path: "x.gif" })).toBe(false)
  })

  it("Video helpers are reachable from the package entry", () => {
    expect(Video.mediaTypes).toContain("video/mp4")
  })
})
