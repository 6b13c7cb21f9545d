/* The largest training plan and input the built-in trainer takes
 * (models/nn_train.c, nn_net.c), and so the largest a client lets a
 * coordinator's task ask of any trainer, built-in or the app's
 * (client/client.c). In common/ because a library built without the
 * engine checks them too. */
#ifndef COHORT_TRAIN_LIMITS_H
#define COHORT_TRAIN_LIMITS_H

#define TRAIN_MAX_EPOCHS 10000
#define TRAIN_MAX_BATCH 65536
#define TRAIN_MAX_MU 1e6f
/* Each of an input's height, width and channels ("HxWxC"). */
#define TRAIN_MAX_SIDE 65535

#endif
