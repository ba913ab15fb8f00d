/**
 * muse's own lines (warnings such as "no OS sandbox for shell commands: …") as ACP session updates.
 *
 * @example
 * ```ts
 * live.send(noticeUpdate("no OS sandbox for shell commands: bwrap is not installed", true))
 * // { sessionUpdate: "notice", severity: "warning", title: "no OS sandbox for shell commands", … }
 * ```
 */
import type * as acp from "@agentclientprotocol/sdk"

/**
 * One of muse's own lines (a warning such as "no OS sandbox for shell commands: …") as a session
 * update: the protocol's `notice` where the editor presents notices, otherwise a message of its own
 * marked `_meta["musekit/notice"]`, so an editor never reads it as the model's words.
 */
export const noticeUpdate = (line: string, notices: boolean): acp.SessionUpdate => {
  const cut = line.indexOf(": ")
  const [title, description] = cut > 0 && cut < 80 ? [line.slice(0, cut), line.slice(cut + 2)] : [line, undefined]
  return notices
    ? { sessionUpdate: "notice", severity: "warning", title, ...(description ? { description } : {}) }
    : {
        sessionUpdate: "agent_message_chunk",
        content: { type: "text", text: `(muse: ${line})\n\n` },
        _meta: { "musekit/notice": { severity: "warning" } }
      }
}
