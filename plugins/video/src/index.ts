/**
 * @musekit/plugin-video — MP4/MOV/WebM input: metadata and scene keyframes (JPEG, with timestamps)
 * as prompt parts, via the ffmpeg and ffprobe installed on the machine.
 *
 * @example
 * ```ts
 * import { Plugin } from "@musekit/core"
 * import { Video, VideoPlugin } from "@musekit/plugin-video"
 *
 * const plugins = Plugin.layer([VideoPlugin.make({ maxFrames: 8 })])
 * // or directly: Video.probe("clip.mp4"), Video.keyframes("clip.mp4", { maxFrames: 4 })
 * ```
 */
export * as Video from "./Video.js"
export * as VideoPlugin from "./VideoPlugin.js"
