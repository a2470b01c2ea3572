// Bare `ws` echo server for the bench's machine limit: every frame goes straight back.
// Prints `listening <port>` once ready. Runs in its own process, like the emulator does.
'use strict';
const { WebSocketServer } = require('ws');
const wss = new WebSocketServer({ host: '127.0.0.1', port: Number(process.argv[2] || 0), perMessageDeflate: false });
wss.on('listening', () => process.stdout.write(`listening ${wss.address().port}\n`));
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
});
process.on('SIGTERM', () => wss.close(() => process.exit(0)));
