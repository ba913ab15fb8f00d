/**
 * The `video` plugin: its `transformPrompt` hook turns every video attachment (`.mp4`, `.m4v`,
 * `.mov`, `.webm`, or a `video/*` media type of those) and every `@clip.mp4` mention in a text part
 * into prompt parts — one text part with the metadata, then per frame a `[frame at 00:02.000]` label
 * and a JPEG file part. Frame bytes go to the session's blob store (`EventLog.putBlob`), so the
 * prompt and the log hold only `blob:<sha256>` references and replay is exact; the model layer
 * resolves them. With `nativeVideo: true` the whole file is sent as one `video/*` part instead
 * (for models that accept video). A file that cannot be read becomes a text part saying why, so
 * the turn goes on.
 *
 * @example
 * ```ts
 * import { Plugin } from "@musekit/core"
 * import { VideoPlugin } from "@musekit/plugin-video"
 *
 * const plugins = Plugin.layer([
 *   VideoPlugin.make({ maxFrames: 6 }),                     // frames for any model
 *   // VideoPlugin.make({ nativeVideo: true }),            // the file itself, e.g. for Gemini
 * ])
 * // user: "why does the build fail in @screen.mp4?" → text, metadata, [frame at 00:00.000], image, …
 * ```
 */
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import type { Prompt } from "@effect/ai"
import { FileSystem } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { EventLog, Plugin, Workspace } from "@musekit/core"
import { Cause, Effect, Option } from "effect"
import * as Video from "./Video.js"

export interface Options extends Video.KeyframeOptions {
  /**
   * Send the whole file as one `video/*` file part (plus the metadata text) instead of frames, for
   * models that accept video input (e.g. Google Gemini). Default false.
   */
  readonly nativeVideo?: boolean | undefined
  /** With `nativeVideo`: larger files are sent as frames instead (default 20 MiB, a common inline limit). */
  readonly maxNativeBytes?: number | undefined
  /** Turn `@path.mp4` mentions in text parts into video parts (default true). */
  readonly mentions?: boolean | undefined
  /**
   * Directory relative paths are resolved against (default: the root of the `Workspace` in
   * context, else the process's working directory).
   */
  readonly cwd?: string | undefined
}

type Part = Prompt.UserMessagePartEncoded

const DEFAULT_MAX_NATIVE_BYTES = 20 * 1024 * 1024

/** `@clip.mp4`, `@"my clip.mov"`, `@'a b.webm'` after a space, a bracket or the start of the text. */
const MENTION = /(?:^|[\s([{<,;])@(?:"([^"\n]+)"|'([^'\n]+)'|([^\s"'()<>[\]{},;]+))/g

/** The video paths mentioned in a text, in order, without duplicates. */
export const mentionedPaths = (text: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (const m of text.matchAll(MENTION)) {
    const path = (m[1] ?? m[2] ?? m[3] ?? "").replace(/[.,:;!?]+$/, "")
    if (Video.mediaTypeOf(path) !== undefined && !out.includes(path)) out.push(path)
  }
  return out
}

/** Whether the plugin takes an attachment (by media type or extension). */
export const isVideoAttachment = (a: Plugin.Attachment): boolean =>
  (a.mediaType !== undefined && Video.mediaTypes.includes(a.mediaType)) || Video.mediaTypeOf(a.path) !== undefined

const resolvePath = (cwd: string, ref: string): string => {
  if (ref.startsWith("file://")) return fileURLToPath(ref)
  if (ref === "~" || ref.startsWith("~/")) return NodePath.join(NodeOs.homedir(), ref.slice(1))
  return NodePath.resolve(cwd, ref)
}

const text = (t: string): Part => ({ type: "text", text: t })

const stem = (ref: string) => NodePath.basename(ref).replace(/\.[^.]+$/, "")

const frameSummary = (k: Video.Keyframes): string => {
  const scenes = k.frames.filter((f) => f.source === "scene").length
  const even = k.frames.length - scenes
  const kinds = [
    `${scenes} at scene changes${scenes > 0 ? " (the first is the opening frame)" : ""}`,
    ...(even > 0 ? [`${even} evenly spaced`] : [])
  ].join(", ")
  const bounded =
    k.sceneChanges + 1 > scenes
      ? `; ffmpeg found ${k.sceneChanges} scene changes, the strongest well-apart ones are shown`
      : ""
  return `${k.frames.length} frame${k.frames.length === 1 ? "" : "s"} follow, each after a label with its time: ${kinds}${bounded}.`
}

/**
 * The hook on its own: `PromptInput` → `PromptInput`. Uses the `EventLog` in context for blobs
 * (without one, frame bytes are put inline) and the `Workspace` in context for relative paths.
 */
export const transformPrompt =
  (options: Options = {}) =>
  (input: Plugin.PromptInput): Effect.Effect<Plugin.PromptInput> =>
    Effect.gen(function* () {
      const mentions = options.mentions ?? true
      const videoAttachments = input.attachments.filter(isVideoAttachment)
      const mentioned = mentions
        ? input.content.some((p) => p.type === "text" && mentionedPaths(p.text).length > 0)
        : false
      if (videoAttachments.length === 0 && !mentioned) return input

      const log = yield* Effect.serviceOption(EventLog.EventLog)
      const workspace = yield* Effect.serviceOption(Workspace.Workspace)
      const cwd = options.cwd ?? Option.match(workspace, { onNone: () => process.cwd(), onSome: (ws) => ws.root })
      const done = new Set<string>()
      let missingBinary = false

      const store = (bytes: Uint8Array) =>
        Option.match(log, {
          onNone: () => Effect.succeed<string | Uint8Array>(bytes),
          onSome: (l) => Effect.map(l.putBlob(bytes), (hash): string | Uint8Array => `blob:${hash}`)
        })

      const asParts = (ref: string, absolute: string, mediaType: string | undefined) =>
        Effect.gen(function* () {
          let note = ""
          if (options.nativeVideo) {
            const metadata = yield* Video.probe(absolute, options)
            const limit = options.maxNativeBytes ?? DEFAULT_MAX_NATIVE_BYTES
            if (metadata.sizeBytes <= limit) {
              const fs = yield* FileSystem.FileSystem
              const bytes = yield* fs.readFile(absolute)
              const type =
                mediaType && Video.mediaTypes.includes(mediaType)
                  ? mediaType
                  : (Video.mediaTypeOf(absolute) ?? "video/mp4")
              return [
                text(`Video ${ref} (${Video.describe(metadata)}). The whole video follows.`),
                {
                  type: "file",
                  mediaType: type,
                  data: yield* store(bytes),
                  fileName: NodePath.basename(ref)
                } satisfies Part
              ]
            }
            note = ` It is over the ${Video.formatBytes(limit)} limit for sending video as is, so frames are shown instead.`
          }
          const k = yield* Video.keyframes(absolute, options)
          const parts: Array<Part> = [
            text(
              `Video ${ref} (${Video.describe(k.metadata)}).${note} ${frameSummary(k)}${k.metadata.hasAudio ? " The audio is not included." : ""}`
            )
          ]
          for (const [i, f] of k.frames.entries()) {
            parts.push(text(`[frame at ${f.timestamp}]`), {
              type: "file",
              mediaType: "image/jpeg",
              data: yield* store(f.jpeg),
              fileName: `${stem(ref)}-frame-${String(i + 1).padStart(2, "0")}.jpg`
            })
          }
          return parts
        }).pipe(
          Effect.provide(NodeContext.layer),
          Effect.catchAllCause((cause) => {
            if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
            const error = Cause.squash(cause)
            let reason = error instanceof Error ? error.message : String(error)
            if (Cause.failureOption(cause).pipe(Option.exists((e) => e._tag === "FfmpegNotFound"))) {
              if (missingBinary) reason = "ffmpeg is not available (see above)"
              missingBinary = true
            }
            return Effect.succeed([text(`[video ${ref} was not included: ${reason}]`)])
          })
        )

      const take = (ref: string, mediaType?: string) => {
        const absolute = resolvePath(cwd, ref)
        if (done.has(absolute)) return Effect.succeed<ReadonlyArray<Part>>([])
        done.add(absolute)
        return asParts(ref, absolute, mediaType)
      }

      const content: Array<Part> = []
      for (const part of input.content) {
        content.push(part)
        if (mentions && part.type === "text") {
          for (const ref of mentionedPaths(part.text)) content.push(...(yield* take(ref)))
        }
      }
      for (const a of videoAttachments) content.push(...(yield* take(a.path, a.mediaType)))
      return { ...input, content, attachments: input.attachments.filter((a) => !isVideoAttachment(a)) }
    })

/**
 * The plugin (name `video`). Options are those of `Video.keyframes` plus `nativeVideo`,
 * `maxNativeBytes`, `mentions` and `cwd`.
 */
export const make = (options: Options = {}): Plugin.Plugin =>
  Plugin.make({ name: "video", checkpoint: "stateless", hooks: { transformPrompt: transformPrompt(options) } })
