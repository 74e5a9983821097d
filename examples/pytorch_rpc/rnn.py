"""The model of the RNN example: a word-language-model LSTM whose embedding table and decoder
live on a parameter server (``ps``) while the LSTM runs on the trainer.

Port of pytorch/examples ``distributed/rpc/rnn/rnn.py``: ``torch`` renamed to ``zgrad``.
"""

import zgrad
import zgrad.distributed.rpc as rpc
import zgrad.nn as nn
from zgrad.distributed.rpc import RRef


def _call_method(method, rref, *args, **kwargs):
    """Runs on the owner of ``rref``: call ``method`` on the object it holds."""
    return method(rref.local_value(), *args, **kwargs)


def _remote_method(method, rref, *args, **kwargs):
    """Run ``method`` on the object ``rref`` holds, on its owner, and return the result."""
    return rpc.rpc_sync(rref.owner(), _call_method, args=[method, rref] + list(args), kwargs=kwargs)


def _parameter_rrefs(module):
    """One RRef per parameter of a local module (for the DistributedOptimizer)."""
    return [RRef(param) for param in module.parameters()]


class EmbeddingTable(nn.Module):
    """Token ids -> embeddings (with dropout), on the parameter server."""

    def __init__(self, ntoken, ninp, dropout):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if zgrad.accelerator.is_available():
            self.encoder = self.encoder.to(zgrad.accelerator.current_accelerator())
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)

    def forward(self, input):
        if zgrad.accelerator.is_available():
            input = input.to(zgrad.accelerator.current_accelerator())
        return self.drop(self.encoder(input)).cpu()


class Decoder(nn.Module):
    """Hidden states -> token scores, on the parameter server."""

    def __init__(self, ntoken, nhid, dropout):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, output):
        return self.decoder(self.drop(output))


class RNNModel(nn.Module):
    """Embedding table and decoder on worker ``ps`` (behind RRefs), the LSTM here."""

    def __init__(self, ps, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.emb_table_rref = rpc.remote(ps, EmbeddingTable, args=(ntoken, ninp, dropout))
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder_rref = rpc.remote(ps, Decoder, args=(ntoken, nhid, dropout))

    def forward(self, input, hidden):
        emb = _remote_method(EmbeddingTable.forward, self.emb_table_rref, input)
        output, hidden = self.rnn(emb, hidden)
        decoded = _remote_method(Decoder.forward, self.decoder_rref, output)
        return decoded, hidden

    def parameter_rrefs(self):
        """RRefs to every parameter: the embedding table's and the decoder's (on ``ps``) and the LSTM's."""
        remote_params = []
        remote_params.extend(_remote_method(_parameter_rrefs, self.emb_table_rref))
        remote_params.extend(_parameter_rrefs(self.rnn))
        remote_params.extend(_remote_method(_parameter_rrefs, self.decoder_rref))
        return remote_params
