/**
 * Reading ffmpeg's stderr when it runs with `-loglevel level+info`: every line carries its level
 * (`[info]`, `[warning]`, `[error]`, `[fatal]`) after the optional `[context @ 0x…]` prefix.
 */

export interface SceneLog {
  /** Selected frame index → pts_time, from showinfo. */
  readonly times: Map<number, number>
  /** Selected frame index → scene score, from `metadata=print`. */
  readonly scores: Map<number, number>
  /** Error and fatal messages, prefixes removed, first 20 kept. */
  readonly errors: Array<string>
  /** Lines of the form `time=00:00:04.04` from the progress line (last one wins), in seconds. */
  lastTime: number | undefined
}

export const emptySceneLog = (): SceneLog => ({
  times: new Map(),
  scores: new Map(),
  errors: [],
  lastTime: undefined
})

const SHOWINFO = /\[Parsed_showinfo_\d+ @ [^\]]*\]\s*(?:\[\w+\]\s*)?n:\s*(\d+)\s+pts:\s*-?\d+\s+pts_time:(-?[\d.eE+-]+)/
const METADATA_FRAME = /\[Parsed_metadata_\d+ @ [^\]]*\]\s*(?:\[\w+\]\s*)?frame:(\d+)\s/
const SCENE_SCORE = /lavfi\.scene_score=([\d.eE+-]+)/
const LEVEL = /^(?:\[[^\]]* @ [^\]]*\]\s*)*\[(error|fatal)\]\s*(.*)$/
const PROGRESS_TIME = /\btime=(\d+):(\d+):(\d+(?:\.\d+)?)/

/** Remove the `[context @ 0x…]` and `[level]` prefixes from a line. */
export const stripPrefixes = (line: string): string =>
  line
    .replace(/^(?:\[[^\]]* @ [^\]]*\]\s*)+/, "")
    .replace(/^\[\w+\]\s*/, "")
    .trim()

/** A line handler that fills `log`; returns itself for use with `process.run`. */
export const sceneLogReader = (log: SceneLog) => {
  let metadataFrame: number | undefined
  return (line: string): void => {
    const info = SHOWINFO.exec(line)
    if (info) {
      log.times.set(Number(info[1]), Number(info[2]))
      return
    }
    const frame = METADATA_FRAME.exec(line)
    if (frame) {
      metadataFrame = Number(frame[1])
      return
    }
    const score = SCENE_SCORE.exec(line)
    if (score && metadataFrame !== undefined) {
      log.scores.set(metadataFrame, Number(score[1]))
      return
    }
    const level = LEVEL.exec(line)
    if (level?.[2]) {
      if (log.errors.length < 20) log.errors.push(level[2].trim())
      return
    }
    const progress = PROGRESS_TIME.exec(line)
    if (progress) log.lastTime = Number(progress[1]) * 3600 + Number(progress[2]) * 60 + Number(progress[3])
  }
}

/** Messages that mean the container itself is damaged or cut off (not a glitch in one frame). */
export const CONTAINER_DAMAGE =
  /partial file|ended prematurely|moov atom not found|invalid data found|truncat|end of file|EBML header parsing failed|Invalid (?:atom|box) size/i
