/**
 * A question's answer keys work only once the question has been on screen for a moment: keys that
 * arrive earlier were typed before the person could read it (type-ahead, a key meant for the
 * prompt that was there a moment ago, a paste) and are dropped, never taken as the answer.
 *
 * @example
 * ```ts
 * const gate = new Gate(() => redraw())
 * gate.arm()                 // the question was just drawn
 * if (!gate.take()) return   // a key came too early: dropped (gate.dropped counts them)
 * ```
 */

/** How long a question waits before its keys work (`MUSE_PROMPT_ARM_MS` sets it, for tests and slow readers). */
export const armDelayMs = (env: NodeJS.ProcessEnv = process.env): number => {
  const v = Number(env.MUSE_PROMPT_ARM_MS)
  return Number.isFinite(v) && v >= 0 && env.MUSE_PROMPT_ARM_MS !== "" ? Math.min(v, 60_000) : 500
}

export class Gate {
  private open = true
  private timer: ReturnType<typeof setTimeout> | undefined
  /** Keys dropped since the question was (re)drawn. */
  dropped = 0

  constructor(
    /** Called when the keys start to work (to draw the choices). */
    private readonly onArmed: () => void,
    private readonly delayMs: number = armDelayMs()
  ) {}

  /** The question was drawn (or changed): keys work after the delay. */
  arm(): void {
    this.dropped = 0
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    if (this.delayMs === 0) {
      this.open = true
      return
    }
    this.open = false
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.open = true
      this.onArmed()
    }, this.delayMs)
  }

  get armed(): boolean {
    return this.open
  }

  /** Whether a key that just arrived may answer; an early one is counted and dropped. */
  take(): boolean {
    if (this.open) return true
    this.dropped++
    return false
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.open = true
  }
}
