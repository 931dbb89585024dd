// Server-Sent Events read from a fetch() body (an EventSource cannot send the Authorization header, and
// the key must never go in a URL). The parser follows the WHATWG rules: CRLF, LF or CR line ends, data
// lines joined with newlines, comments ignored, a frame without data dispatches nothing.

export class SseParser {
  constructor() {
    this.buffer = "";
    this.data = [];
    this.event = "";
    this.lastId = null;
  }

  feed(text) {
    this.buffer += text;
    const frames = [];
    for (;;) {
      const match = /\r\n|\n|\r/.exec(this.buffer);
      if (!match) break;
      // A CR at the very end may be the first half of a CRLF: wait for more.
      if (match[0] === "\r" && match.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const frame = this.line(line);
      if (frame) frames.push(frame);
    }
    return frames;
  }

  line(line) {
    if (line === "") {
      const data = this.data;
      const event = this.event || "message";
      this.data = [];
      this.event = "";
      return data.length ? { event, data: data.join("\n"), id: this.lastId } : null;
    }
    if (line.startsWith(":")) return null;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") this.data.push(value);
    else if (name === "event") this.event = value;
    else if (name === "id" && !value.includes("\0")) this.lastId = value;
    return null;
  }
}
